import { Duration, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Construct } from 'constructs';
import { environmentOf } from '../../lambdas/config';
import { downstreamEnvironment, emailModeOf, type DownstreamSettings } from './downstreams';
import type { IdempotencyTable, TableItemAction } from './idempotency-store';
import type { OutboxQueue } from './outbox-queue';
import { handlerEntry } from '../bundling';
import { commonFunctionProps, ServiceFunction, type CommonFunctionProps } from './service-function';

/** The consumer's timeout; the queue's visibility timeout is derived from it (x6). */
export const DEFAULT_CONSUMER_TIMEOUT = Duration.seconds(60);

export interface OutboxConsumerFunctionProps extends CommonFunctionProps {
  /** The handler file to bundle. Default: the reference endpoint's (the demo tools' emails and tickets); IdempotentMcpEndpoint passes one delivering your event types. */
  entry?: string;
  store: IdempotencyTable;
  queue: OutboxQueue;
  downstreams?: DownstreamSettings;
  /** Must match the timeout the OutboxQueue was sized for. Default 60 s. */
  timeout?: Duration;
  /** Messages per invocation. Default 5. */
  batchSize?: number;
  /** Upper bound of concurrent consumer instances (protects the downstreams). Default 5. */
  maxConcurrency?: number;
}

/**
 * The dedup claim (Update with a condition), its settlement with the event in one transaction (two Updates),
 * its release (Delete), and consistent reads of claim and event (Get).
 */
export const CONSUMER_TABLE_ACTIONS: TableItemAction[] = ['GetItem', 'UpdateItem', 'DeleteItem'];

/** Performs the queued side effects (emails, tickets) once per event, reporting failures per message. */
export class OutboxConsumerFunction extends Construct {
  readonly handler: ServiceFunction;

  constructor(scope: Construct, id: string, props: OutboxConsumerFunctionProps) {
    super(scope, id);
    const downstreams = props.downstreams ?? {};
    this.handler = new ServiceFunction(this, 'Handler', {
      ...commonFunctionProps(props),
      entry: props.entry ?? handlerEntry('consumer'),
      description: 'Outbox consumer: performs queued side effects once per event',
      timeout: props.timeout ?? DEFAULT_CONSUMER_TIMEOUT,
      environment: {
        ...environmentOf({
          tableName: props.store.tableName,
          outboxQueueUrl: props.queue.queue.queueUrl,
          outboxDeadLetterQueueUrl: props.queue.deadLetterQueue.queueUrl,
          outboxDeliveryBudgetSeconds: props.queue.deliveryBudget.toSeconds(),
          outboxMaxReceiveCount: props.queue.maxReceiveCount,
        }),
        ...downstreamEnvironment(downstreams),
      },
    });
    props.store.grantItems(this.handler.role, CONSUMER_TABLE_ACTIONS);
    // A message whose delivery budget is spent is moved to the dead-letter queue by the consumer.
    props.queue.deadLetterQueue.grantSendMessages(this.handler.role);

    if (emailModeOf(downstreams) === 'ses' && downstreams.emailFrom) {
      const stack = Stack.of(this);
      this.handler.role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          actions: ['ses:SendEmail'],
          // SES authorizes the sender identity and, while the account is in the SES sandbox, each recipient
          // identity too; the condition pins the From address so the function can send only as EMAIL_FROM.
          resources: [stack.formatArn({ service: 'ses', resource: 'identity', resourceName: '*' })],
          conditions: { StringEquals: { 'ses:FromAddress': downstreams.emailFrom } },
        }),
      );
      Validations.of(this.handler.role).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ses:<AWS::Region>:<AWS::AccountId>:identity/*]',
        reason:
          'ses:SendEmail is authorized against every identity involved (the sender and, in the SES sandbox, each recipient), which are not known in advance; the ses:FromAddress condition limits sending to the configured EMAIL_FROM.',
      });
    }

    this.handler.function.addEventSource(
      new SqsEventSource(props.queue.queue, {
        batchSize: props.batchSize ?? 5,
        reportBatchItemFailures: true,
        maxConcurrency: props.maxConcurrency ?? 5,
      }),
    );
  }
}
