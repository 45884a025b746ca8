import { fileURLToPath } from 'node:url';
import { CfnOutput, Duration, Stack, Validations, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { IdempotentMcpEndpoint, type EndpointSettings } from 'idempotent-mcp/cdk';
import { downstreamEnvironment, emailModeOf, validateDownstreams, type DownstreamSettings } from './downstreams';
import { SandboxDownstreams } from './sandbox-downstreams';

export interface IdempotentMcpStackProps extends StackProps, Omit<EndpointSettings, 'alarmTopic' | 'downstreamTimeout'> {
  /**
   * Payments, tickets and email settings of the demo tools. Default none: only create_order and get_order are served
   * (and the toolkit's own tools); each setting turns on the tool it serves.
   */
  readonly downstreams?: DownstreamSettings;
  /** Deploy the sandbox downstreams and point the tools at them (demo only). Default false. */
  readonly sandbox?: boolean;
  /** Subscribe this address to a new alarm topic. Default none. */
  readonly alarmEmail?: string;
  /** Or send alarms to an existing topic. Default none. */
  readonly alarmTopicArn?: string;
}

const referenceFile = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The reference endpoint (`cdk deploy` in this repository): the demo tools whose downstream is configured, served by
 * the toolkit's IdempotentMcpEndpoint exactly as a team serves its own (with a demo tenant's client, and the
 * endpoint's outputs), plus the sandbox downstreams when asked for.
 */
export class IdempotentMcpStack extends Stack {
  readonly endpoint: IdempotentMcpEndpoint;
  readonly sandbox?: SandboxDownstreams;

  constructor(scope: Construct, id: string, props: IdempotentMcpStackProps = {}) {
    super(scope, id, { description: 'Idempotent MCP endpoint on AWS Lambda + DynamoDB', ...props });

    this.sandbox = props.sandbox
      ? new SandboxDownstreams(this, 'Sandbox', {
          powertools: props.powertools,
          logRetention: props.logRetention,
          downstreamTimeoutMs: props.downstreams?.timeoutMs,
        })
      : undefined;
    const downstreams = this.sandbox?.downstreams ?? props.downstreams ?? {};
    validateDownstreams(downstreams);

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

    // 'Default' keeps the endpoint's resources at the logical ids of every earlier deploy (CDK leaves it out of ids).
    this.endpoint = new IdempotentMcpEndpoint(this, 'Default', {
      ...props,
      // The demo is tried with one tenant's client, made here; a team's endpoint makes none unless asked.
      auth: props.auth?.external ? props.auth : { demoClient: true, ...props.auth },
      // The demo tools whose downstream is configured here (docs/deploy.md): the module reads the same settings.
      tools: referenceFile('../served-tools.ts'),
      deliveries: referenceFile('../deliveries.ts'),
      environment: downstreamEnvironment(downstreams),
      downstreamTimeout: downstreams.timeoutMs === undefined ? undefined : Duration.millis(downstreams.timeoutMs),
      alarmTopic,
      monitoredFunctions: this.sandbox ? { Sandbox: this.sandbox.handler.function } : {},
    });
    if (emailModeOf(downstreams) === 'ses' && downstreams.emailFrom) this.allowSesSending(downstreams.emailFrom);

    // The endpoint adds its own outputs (McpUrl, the token's, the approval page's, the table and queues).
    if (this.sandbox)
      new CfnOutput(this, 'SandboxUrl', { value: this.sandbox.url.url, description: 'Demo downstreams (ledger: GET sandbox/ledger)' });
  }

  /** The consumer sends the demo's emails through SES, only as `from`. */
  private allowSesSending(from: string) {
    // The reference endpoint always has deliveries, so always a consumer.
    const role = this.endpoint.consumerFunction?.role;
    if (!role) return;
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['ses:SendEmail'],
        // SES authorizes the sender identity and, while the account is in the SES sandbox, each recipient
        // identity too; the condition pins the From address so the function can send only as EMAIL_FROM.
        resources: [this.formatArn({ service: 'ses', resource: 'identity', resourceName: '*' })],
        conditions: { StringEquals: { 'ses:FromAddress': from } },
      }),
    );
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ses:<AWS::Region>:<AWS::AccountId>:identity/*]',
      reason:
        'ses:SendEmail is authorized against every identity involved (the sender and, in the SES sandbox, each recipient), which are not known in advance; the ses:FromAddress condition limits sending to the configured EMAIL_FROM.',
    });
  }
}
