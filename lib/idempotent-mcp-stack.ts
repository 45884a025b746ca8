import { CfnOutput, Duration, Fn, RemovalPolicy, Stack, Validations, type StackProps } from 'aws-cdk-lib';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { Auth, type AuthProps } from './constructs/auth';
import { validateDownstreams, type DownstreamSettings } from './constructs/downstreams';
import { IdempotencyStore } from './constructs/idempotency-store';
import { McpFunction } from './constructs/mcp-function';
import { Monitoring } from './constructs/monitoring';
import { DEFAULT_CONSUMER_TIMEOUT, OutboxConsumer } from './constructs/outbox-consumer';
import { OutboxQueue } from './constructs/outbox-queue';
import { OutboxRelay } from './constructs/outbox-relay';
import { Reconciler } from './constructs/reconciler';
import { SandboxDownstreams } from './constructs/sandbox-downstreams';
import type { CommonFunctionProps, PowertoolsSettings } from './constructs/service-function';
import { MCP_PATH } from '../lambdas/http/app';

export interface IdempotentMcpStackProps extends StackProps {
  /** Default: a Cognito user pool with a client-credentials app client. */
  auth?: AuthProps;
  /** Payments, tickets and email settings. Ignored when `sandbox` is on. */
  downstreams?: DownstreamSettings;
  /** Deploy the sandbox downstreams and point the tools at them (demo only). Default false. */
  sandbox?: boolean;
  /** Browser origins allowed to call the MCP URL. Default none. */
  allowedOrigins?: string[];
  /** Tools whose confirmation 2025-era clients do on their side (see McpFunctionProps). Default none. */
  confirmationOptOut?: string[];
  /** Set when a custom domain fronts the Function URL. */
  publicBaseUrl?: string;
  /** Encrypt the table with a new customer managed KMS key ($1/month) instead of the AWS managed key. Default false. */
  customerManagedKey?: boolean;
  /** Default RETAIN. DESTROY only for throw-away demo stacks. */
  tableRemovalPolicy?: RemovalPolicy;
  powertools?: PowertoolsSettings;
  logRetention?: logs.RetentionDays;
  /** Subscribe this address to a new alarm topic. */
  alarmEmail?: string;
  /** Or send alarms to an existing topic. */
  alarmTopicArn?: string;
  /** Default true. */
  dashboard?: boolean;
  /** How often the reconciler runs; also what `unknown` answers suggest waiting. Default 1 minute. */
  reconcilePeriod?: Duration;
  /** Checks of an unreachable downstream before a record is parked as NEEDS_REVIEW. Default 8. */
  reconcileMaxAttempts?: number;
}

/**
 * The whole endpoint: table, MCP function and URL, outbox (relay, queue, consumer), reconciler, auth and alarms.
 * Every construct takes typed props with defaults; this stack only wires them together.
 */
export class IdempotentMcpStack extends Stack {
  readonly store: IdempotencyStore;
  readonly outbox: OutboxQueue;
  readonly mcp: McpFunction;
  readonly relay: OutboxRelay;
  readonly consumer: OutboxConsumer;
  readonly reconciler: Reconciler;
  readonly auth: Auth;
  readonly monitoring: Monitoring;
  readonly sandbox?: SandboxDownstreams;

  constructor(scope: Construct, id: string, props: IdempotentMcpStackProps = {}) {
    super(scope, id, { description: 'Idempotent MCP endpoint on AWS Lambda + DynamoDB', ...props });
    const common: CommonFunctionProps = { powertools: props.powertools, logRetention: props.logRetention };
    const tableRemovalPolicy = props.tableRemovalPolicy ?? RemovalPolicy.RETAIN;

    const encryptionKey = props.customerManagedKey
      ? new kms.Key(this, 'TableKey', {
          description: 'Encrypts the idempotency table and its stream',
          enableKeyRotation: true,
          // The key must outlive the retained table, or its data becomes unreadable.
          removalPolicy: tableRemovalPolicy,
        })
      : undefined;
    this.store = new IdempotencyStore(this, 'Store', { encryptionKey, removalPolicy: tableRemovalPolicy });

    this.sandbox = props.sandbox
      ? new SandboxDownstreams(this, 'Sandbox', { ...common, downstreamTimeoutMs: props.downstreams?.timeoutMs })
      : undefined;
    const downstreams = this.sandbox?.downstreams ?? props.downstreams ?? {};
    validateDownstreams(downstreams);

    this.auth = new Auth(this, 'Auth', props.auth);
    this.mcp = new McpFunction(this, 'Mcp', {
      ...common,
      store: this.store,
      auth: this.auth.verification,
      downstreams,
      allowedOrigins: props.allowedOrigins,
      confirmationOptOut: props.confirmationOptOut,
      publicBaseUrl: props.publicBaseUrl,
      reconcilePeriod: props.reconcilePeriod,
    });

    this.outbox = new OutboxQueue(this, 'Outbox', { consumerTimeout: DEFAULT_CONSUMER_TIMEOUT });
    this.relay = new OutboxRelay(this, 'Relay', { ...common, store: this.store, queue: this.outbox });
    this.consumer = new OutboxConsumer(this, 'Consumer', {
      ...common,
      store: this.store,
      queue: this.outbox,
      downstreams,
      timeout: DEFAULT_CONSUMER_TIMEOUT,
    });
    this.reconciler = new Reconciler(this, 'Reconciler', {
      ...common,
      store: this.store,
      queue: this.outbox,
      downstreams,
      period: props.reconcilePeriod,
      maxAttempts: props.reconcileMaxAttempts,
    });

    let alarmTopic: sns.ITopic | undefined;
    if (props.alarmTopicArn) {
      alarmTopic = sns.Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn);
    } else if (props.alarmEmail) {
      const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'Idempotent MCP alarms', enforceSSL: true });
      topic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
      Validations.of(topic).acknowledge({
        id: 'AwsSolutions-SNS2',
        reason:
          'Alarm notifications carry only alarm names and states. CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key, and a customer managed key would cost $1/month for no protected data.',
      });
      alarmTopic = topic;
    }
    this.monitoring = new Monitoring(this, 'Monitoring', {
      functions: {
        Mcp: this.mcp.handler.function,
        Relay: this.relay.handler.function,
        Consumer: this.consumer.handler.function,
        Reconciler: this.reconciler.handler.function,
        ...(this.sandbox ? { Sandbox: this.sandbox.handler.function } : {}),
      },
      deadLetterQueue: this.outbox.deadLetterQueue,
      powertools: props.powertools,
      alarmTopic,
      dashboard: props.dashboard,
    });

    new CfnOutput(this, 'McpUrl', {
      value: Fn.join('', [this.mcp.url.url, MCP_PATH.slice(1)]),
      description: 'The MCP endpoint (streamable HTTP): hand it to your agents',
    });
    if (this.auth.tokenEndpoint) {
      new CfnOutput(this, 'TokenEndpoint', { value: this.auth.tokenEndpoint, description: 'OAuth 2.0 token endpoint (client credentials)' });
      new CfnOutput(this, 'TokenScope', { value: this.auth.scope!, description: 'The scope to request' });
      new CfnOutput(this, 'ClientId', { value: this.auth.client!.userPoolClientId, description: 'Demo tenant app client id (also its tenant id)' });
      new CfnOutput(this, 'UserPoolId', { value: this.auth.userPool!.userPoolId });
      new CfnOutput(this, 'ClientSecretCommand', {
        value: this.auth.clientSecretCommand()!,
        description: 'Prints the client secret (kept out of outputs and the template)',
      });
    }
    new CfnOutput(this, 'TableName', { value: this.store.tableName });
    // `npm run ops -- --stack <name>` reads these three.
    new CfnOutput(this, 'OutboxQueueUrl', { value: this.outbox.queue.queueUrl });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.outbox.deadLetterQueue.queueUrl });
    if (this.monitoring.dashboard) new CfnOutput(this, 'DashboardName', { value: this.monitoring.dashboard.dashboardName });
    if (this.sandbox) new CfnOutput(this, 'SandboxUrl', { value: this.sandbox.url.url, description: 'Demo downstreams (ledger: GET sandbox/ledger)' });
  }
}
