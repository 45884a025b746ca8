import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { EnvVars } from '../lambdas/config';
import { Auth, type AuthProps } from './constructs/auth';
import { IdempotencyTable } from './constructs/idempotency-store';
import { McpFunction } from './constructs/mcp-function';
import { Monitoring } from './constructs/monitoring';
import { DEFAULT_CONSUMER_TIMEOUT, OutboxConsumerFunction } from './constructs/outbox-consumer';
import { OutboxQueue } from './constructs/outbox-queue';
import { OutboxRelayFunction } from './constructs/outbox-relay';
import { DEFAULT_RECONCILE_PERIOD, ReconcilerFunction } from './constructs/reconciler';
import type { CommonFunctionProps, PowertoolsSettings } from './constructs/service-function';
import { checkToolsModule, deliveriesFunctionEntry, toolsFunctionEntry } from './tools-entry';

/** What every endpoint is configured with, the reference stack and a team's IdempotentMcpEndpoint alike. */
export interface EndpointSettings {
  /** Who may call. Default: a new Cognito user pool issuing client-credentials tokens (tenant = app client id). */
  readonly auth?: AuthProps;
  /** Bound of one downstream call by a delivery or a reconcile check (DOWNSTREAM_TIMEOUT_MS). Default 3 seconds. */
  readonly downstreamTimeout?: Duration;
  /** Browser origins allowed to call the MCP URL. Default none: only non-browser clients. */
  readonly allowedOrigins?: string[];
  /**
   * Tools with `confirmation: 'required'` that 2025-era clients may call without the person's confirmation through the
   * server (for clients that confirm on their side). Default none: those clients get CONFIRMATION_UNAVAILABLE.
   */
  readonly confirmationOptOut?: string[];
  /** Set when a custom domain fronts the Function URL. Default: the request's own host. */
  readonly publicBaseUrl?: string;
  /** Encrypt the table with a new customer managed KMS key ($1/month) instead of the AWS managed key. Default false. */
  readonly customerManagedKey?: boolean;
  /** Default RETAIN: a duplicate after a redeploy must still replay. DESTROY only for throw-away stacks. */
  readonly tableRemovalPolicy?: RemovalPolicy;
  /** Service name, metrics namespace and log level of every function. Default `idempotent-mcp`, `IdempotentMcp`, INFO. */
  readonly powertools?: PowertoolsSettings;
  /** Default one month. */
  readonly logRetention?: logs.RetentionDays;
  /** Where alarms go. Default: nowhere (they still show in the console). */
  readonly alarmTopic?: sns.ITopic;
  /** More functions whose errors and throttles raise the endpoint's alarms. Default none. */
  readonly monitoredFunctions?: Record<string, lambda.IFunction>;
  /** A small CloudWatch dashboard. Default true. */
  readonly dashboard?: boolean;
  /** How often the reconciler runs; also what `unknown` answers suggest waiting. Default 1 minute (the shortest). */
  readonly reconcilePeriod?: Duration;
  /** Checks of an unreachable downstream before a record is parked as NEEDS_REVIEW. Default 8. */
  readonly reconcileMaxAttempts?: number;
}

/** The parts of an endpoint, created directly in a scope (a stack keeps the logical ids it always had). */
export interface EndpointParts {
  readonly store: IdempotencyTable;
  readonly outbox: OutboxQueue;
  readonly mcp: McpFunction;
  readonly relay: OutboxRelayFunction;
  readonly consumer: OutboxConsumerFunction;
  readonly reconciler: ReconcilerFunction;
  readonly auth: Auth;
  readonly monitoring: Monitoring;
}

export interface EndpointPartsProps extends EndpointSettings {
  /** The MCP, reconciler and consumer functions' entries (they carry the tools and deliveries). */
  readonly entries: { mcp: string; reconciler: string; consumer: string };
}

/** Creates table, auth, MCP function and URL, outbox (queue, relay, consumer), reconciler and alarms in `scope`. */
export function addEndpointParts(scope: Construct, props: EndpointPartsProps): EndpointParts {
  const common: CommonFunctionProps = { powertools: props.powertools, logRetention: props.logRetention };
  const tableRemovalPolicy = props.tableRemovalPolicy ?? RemovalPolicy.RETAIN;
  const encryptionKey = props.customerManagedKey
    ? new kms.Key(scope, 'TableKey', {
        description: 'Encrypts the idempotency table and its stream',
        enableKeyRotation: true,
        // The key must outlive the retained table, or its data becomes unreadable.
        removalPolicy: tableRemovalPolicy,
      })
    : undefined;
  const store = new IdempotencyTable(scope, 'Store', { encryptionKey, removalPolicy: tableRemovalPolicy });
  const auth = new Auth(scope, 'Auth', props.auth);
  const mcp = new McpFunction(scope, 'Mcp', {
    ...common,
    entry: props.entries.mcp,
    store,
    auth: auth.verification,
    downstreamTimeout: props.downstreamTimeout,
    allowedOrigins: props.allowedOrigins,
    confirmationOptOut: props.confirmationOptOut,
    publicBaseUrl: props.publicBaseUrl,
    reconcilePeriod: props.reconcilePeriod,
  });
  const outbox = new OutboxQueue(scope, 'Outbox', { consumerTimeout: DEFAULT_CONSUMER_TIMEOUT });
  const relay = new OutboxRelayFunction(scope, 'Relay', { ...common, store, queue: outbox });
  const consumer = new OutboxConsumerFunction(scope, 'Consumer', { ...common, entry: props.entries.consumer, store, queue: outbox, downstreamTimeout: props.downstreamTimeout, timeout: DEFAULT_CONSUMER_TIMEOUT });
  const reconciler = new ReconcilerFunction(scope, 'Reconciler', {
    ...common,
    entry: props.entries.reconciler,
    store,
    queue: outbox,
    downstreamTimeout: props.downstreamTimeout,
    period: props.reconcilePeriod,
    maxAttempts: props.reconcileMaxAttempts,
  });
  const monitoring = new Monitoring(scope, 'Monitoring', {
    functions: {
      Mcp: mcp.handler.function,
      Relay: relay.handler.function,
      Consumer: consumer.handler.function,
      Reconciler: reconciler.handler.function,
      ...props.monitoredFunctions,
    },
    deadLetterQueue: outbox.deadLetterQueue,
    powertools: props.powertools,
    alarmTopic: props.alarmTopic,
    dashboard: props.dashboard,
  });
  return { store, outbox, mcp, relay, consumer, reconciler, auth, monitoring };
}

export interface IdempotentMcpEndpointProps extends EndpointSettings {
  /**
   * Your tools module: a .ts or .js file exporting `tools`, an array of defineWriteTool / defineReadTool results.
   * esbuild bundles it into the MCP function and the reconciler (whose reconcile hooks settle lost outcomes).
   * Required: an endpoint serves only the tools you give it.
   */
  readonly tools: string;
  /**
   * Your deliveries module: a .ts or .js file exporting `deliveries`, an object of delivery handlers by outbox event
   * type (`{ 'invoice.send': { deliver, verify } }`), for the events your tools commit. esbuild bundles it into the
   * outbox consumer, which runs each event's `deliver` once. Default none: the consumer has no handlers.
   */
  readonly deliveries?: string;
  /** Settings your code reads, added to the functions that run it (MCP, reconciler; the consumer with `deliveries`). Default none. The endpoint's own names are refused. */
  readonly environment?: Record<string, string>;
  /** What your code may do (a bucket, another table, a queue), granted to the functions that run it, as `environment`. Default none. */
  readonly grants?: iam.PolicyStatement[];
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const OWN_NAMES = new Set(Object.values(EnvVars).map((v) => v.name));

function checkEnvironment(environment: Record<string, string>) {
  for (const [name, value] of Object.entries(environment)) {
    if (!ENV_NAME.test(name)) throw new Error(`IdempotentMcpEndpoint: environment.${name} is not a valid variable name`);
    if (OWN_NAMES.has(name)) throw new Error(`IdempotentMcpEndpoint: environment.${name} is set by the endpoint itself; use its own prop`);
    if (name.startsWith('AWS_')) throw new Error(`IdempotentMcpEndpoint: environment.${name} is reserved by Lambda`);
    if (typeof value !== 'string') throw new Error(`IdempotentMcpEndpoint: environment.${name} must be a string`);
  }
}

/**
 * An idempotent MCP endpoint serving your own tools: the table, the MCP function and its URL, the outbox (queue,
 * relay, consumer), the reconciler and the alarms. A misconfigured prop fails the synth with the prop's name.
 */
// The parts are the endpoint's own fields (declaration merging), assigned once from addEndpointParts.
export interface IdempotentMcpEndpoint extends EndpointParts {}
export class IdempotentMcpEndpoint extends Construct {
  constructor(scope: Construct, id: string, props: IdempotentMcpEndpointProps) {
    super(scope, id);
    const tools = checkToolsModule('IdempotentMcpEndpoint: tools', props?.tools);
    const deliveries = props.deliveries === undefined ? undefined : checkToolsModule('IdempotentMcpEndpoint: deliveries', props.deliveries, 'deliveries');
    checkEnvironment(props.environment ?? {});
    if (props.reconcilePeriod && props.reconcilePeriod.toMilliseconds() < DEFAULT_RECONCILE_PERIOD.toMilliseconds()) {
      throw new Error('IdempotentMcpEndpoint: reconcilePeriod must be at least 1 minute (the shortest EventBridge rate)');
    }
    for (const origin of props.allowedOrigins ?? []) {
      if (!/^https?:\/\/[^/\s]+$/.test(origin)) throw new Error(`IdempotentMcpEndpoint: allowedOrigins has '${origin}', not an origin (scheme://host[:port])`);
    }
    Object.assign(this, addEndpointParts(this, {
      ...props,
      entries: {
        mcp: toolsFunctionEntry('mcp', tools),
        reconciler: toolsFunctionEntry('reconciler', tools),
        consumer: deliveriesFunctionEntry(deliveries, tools),
      },
    }));
    for (const fn of [this.mcp.handler, this.reconciler.handler, ...(deliveries ? [this.consumer.handler] : [])]) {
      for (const [name, value] of Object.entries(props.environment ?? {})) fn.function.addEnvironment(name, value);
      for (const statement of props.grants ?? []) fn.role.addToPrincipalPolicy(statement);
    }
  }

  /** The MCP endpoint's URL (streamable HTTP), e.g. for a CfnOutput. */
  get mcpUrl(): string {
    return this.mcp.mcpUrl;
  }
}
