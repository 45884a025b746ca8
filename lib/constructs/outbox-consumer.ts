import { Duration } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Construct } from 'constructs';
import { environmentOf } from '../../lambdas/config';
import type { IdempotencyTable, TableItemAction } from './idempotency-store';
import type { OutboxQueue } from './outbox-queue';
import { commonFunctionProps, downstreamTimeoutMs, ServiceFunction, type CommonFunctionProps } from './service-function';

/**
 * The consumer's timeout; the queue's visibility timeout is derived from it (x6).
 */
export const DEFAULT_CONSUMER_TIMEOUT = Duration.seconds(60);

/** How many consumer instances SQS runs at most, by default. */
const DEFAULT_CONSUMER_MAX_CONCURRENCY = 5;

/**
 * Props of `OutboxConsumerFunction`: its entry, the table, the queue, its batch and concurrency, the function's settings.
 */
export interface OutboxConsumerFunctionProps extends CommonFunctionProps {
  /** The handler file to bundle: IdempotentMcpEndpoint generates one around your deliveries module. */
  readonly entry: string;
  readonly store: IdempotencyTable;
  readonly queue: OutboxQueue;
  /**
   * Bound of one delivery or verification (DOWNSTREAM_TIMEOUT_MS).
   * @default 3 seconds (the functions' own default)
   */
  readonly downstreamTimeout?: Duration;
  /**
   * Must match the timeout the OutboxQueue was sized for.
   * @default DEFAULT_CONSUMER_TIMEOUT (60 s)
   */
  readonly timeout?: Duration;
  /**
   * Messages per invocation.
   * @default 5
   */
  readonly batchSize?: number;
  /**
   * Upper bound of concurrent consumer instances (protects the downstreams); at most its reserved concurrency.
   * @default 5
   */
  readonly maxConcurrency?: number;
}

/**
 * The dedup claim (Update with a condition), its settlement with the event in one transaction (two Updates),
 * its release (Delete), and consistent reads of claim and event (Get).
 */
export const CONSUMER_TABLE_ACTIONS: TableItemAction[] = ['GetItem', 'UpdateItem', 'DeleteItem'];

/**
 * Performs the queued side effects (emails, tickets) once per event, reporting failures per message.
 */
export class OutboxConsumerFunction extends Construct {
  readonly handler: ServiceFunction;

  constructor(scope: Construct, id: string, props: OutboxConsumerFunctionProps) {
    super(scope, id);
    const maxConcurrency = props.maxConcurrency ?? DEFAULT_CONSUMER_MAX_CONCURRENCY;
    // SQS keeps polling up to maxConcurrency; a lower reserved concurrency throttles batches, each throttle a receive.
    if (props.reservedConcurrentExecutions !== undefined && props.reservedConcurrentExecutions < maxConcurrency) {
      throw new Error(
        `OutboxConsumerFunction: reservedConcurrentExecutions must be at least its maxConcurrency (${maxConcurrency}), or throttled batches use up their receives`,
      );
    }
    this.handler = new ServiceFunction(this, 'Handler', {
      ...commonFunctionProps(props),
      entry: props.entry,
      description: 'Outbox consumer: performs queued side effects once per event',
      timeout: props.timeout ?? DEFAULT_CONSUMER_TIMEOUT,
      environment: environmentOf({
        tableName: props.store.tableName,
        outboxQueueUrl: props.queue.queue.queueUrl,
        outboxDeadLetterQueueUrl: props.queue.deadLetterQueue.queueUrl,
        outboxDeliveryBudgetSeconds: props.queue.deliveryBudget.toSeconds(),
        outboxMaxReceiveCount: props.queue.maxReceiveCount,
        downstreamTimeoutMs: downstreamTimeoutMs(props.downstreamTimeout),
      }),
    });
    props.store.grantItems(this.handler.role, CONSUMER_TABLE_ACTIONS);
    // A message whose delivery budget is spent is moved to the dead-letter queue by the consumer.
    props.queue.grantSendToDeadLetterQueue(this.handler.role);

    this.handler.function.addEventSource(
      new SqsEventSource(props.queue.queue, {
        batchSize: props.batchSize ?? 5,
        reportBatchItemFailures: true,
        maxConcurrency,
      }),
    );
  }
}
