import { CfnOutput, Stack, Validations, type StackProps } from 'aws-cdk-lib';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { SandboxDownstreams } from './constructs/sandbox-downstreams';
import type { CommonFunctionProps } from './constructs/service-function';
import { addEndpointParts, type EndpointParts, type EndpointSettings } from './endpoint';

export interface IdempotentMcpStackProps extends StackProps, Omit<EndpointSettings, 'alarmTopic'> {
  /** Deploy the sandbox downstreams and point the tools at them (demo only). Default false. */
  sandbox?: boolean;
  /** Subscribe this address to a new alarm topic. */
  alarmEmail?: string;
  /** Or send alarms to an existing topic. */
  alarmTopicArn?: string;
}

/**
 * The reference endpoint (`cdk deploy` in this repository): the demo tools on the endpoint's parts, the sandbox
 * downstreams when asked for, and the outputs an operator needs. A team serves its own tools with
 * IdempotentMcpEndpoint instead.
 */
// The endpoint's parts are the stack's own fields (declaration merging), assigned once from addEndpointParts.
export interface IdempotentMcpStack extends EndpointParts {}
export class IdempotentMcpStack extends Stack {
  readonly sandbox?: SandboxDownstreams;

  constructor(scope: Construct, id: string, props: IdempotentMcpStackProps = {}) {
    super(scope, id, { description: 'Idempotent MCP endpoint on AWS Lambda + DynamoDB', ...props });
    const common: CommonFunctionProps = { powertools: props.powertools, logRetention: props.logRetention };

    this.sandbox = props.sandbox
      ? new SandboxDownstreams(this, 'Sandbox', { ...common, downstreamTimeoutMs: props.downstreams?.timeoutMs })
      : undefined;

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

    // Created directly in the stack, so the resources keep the logical ids of every earlier deploy.
    Object.assign(
      this,
      addEndpointParts(this, {
        ...props,
        downstreams: this.sandbox?.downstreams ?? props.downstreams,
        alarmTopic,
        monitoredFunctions: this.sandbox ? { Sandbox: this.sandbox.handler.function } : {},
      }),
    );

    new CfnOutput(this, 'McpUrl', {
      value: this.mcp.mcpUrl,
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
