import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

/** AWS: the source queue's visibility timeout should be at least six times the consuming function's timeout. */
export const VISIBILITY_TO_CONSUMER_TIMEOUT = 6;

export interface OutboxQueueProps {
  /** The consumer function's timeout; the visibility timeout is derived from it. */
  consumerTimeout: Duration;
  /** The event source's batching window, added to the visibility timeout. Default none. */
  maxBatchingWindow?: Duration;
  /** Explicit visibility timeout; must be at least six times the consumer timeout plus the batching window. */
  visibilityTimeout?: Duration;
  /** Receives before a message moves to the dead-letter queue. Default 5 (1 to 20). */
  maxReceiveCount?: number;
  /** Customer managed key. Default: SQS managed encryption (SSE-SQS, no key cost). */
  encryptionKey?: kms.IKey;
  /** How long the dead-letter queue keeps a message for a person to look at. Default 14 days (the maximum). */
  deadLetterRetention?: Duration;
}

/**
 * The outbox queue and its dead-letter queue. Both encrypted and TLS-only; a message that keeps failing moves
 * to the dead-letter queue after a bounded number of receives (and raises the DLQ alarm).
 */
export class OutboxQueue extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly maxReceiveCount: number;

  constructor(scope: Construct, id: string, props: OutboxQueueProps) {
    super(scope, id);
    const minimum = props.consumerTimeout.toSeconds() * VISIBILITY_TO_CONSUMER_TIMEOUT + (props.maxBatchingWindow?.toSeconds() ?? 0);
    const visibilityTimeout = props.visibilityTimeout ?? Duration.seconds(minimum);
    if (visibilityTimeout.toSeconds() < minimum) {
      throw new Error(
        `OutboxQueue: visibilityTimeout ${visibilityTimeout.toSeconds()} s is below ${minimum} s (6 x the consumer timeout + batching window): a slow batch would be delivered twice while still running`,
      );
    }
    this.maxReceiveCount = props.maxReceiveCount ?? 5;
    if (!Number.isInteger(this.maxReceiveCount) || this.maxReceiveCount < 1 || this.maxReceiveCount > 20) {
      throw new Error('OutboxQueue: maxReceiveCount must be an integer from 1 to 20');
    }
    const encryption = props.encryptionKey
      ? { encryption: sqs.QueueEncryption.KMS, encryptionMasterKey: props.encryptionKey }
      : { encryption: sqs.QueueEncryption.SQS_MANAGED };

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      ...encryption,
      enforceSSL: true,
      retentionPeriod: props.deadLetterRetention ?? Duration.days(14),
      // The table keeps every outbox event and its delivery state; the queues are transport only.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.queue = new sqs.Queue(this, 'Queue', {
      ...encryption,
      enforceSSL: true,
      visibilityTimeout,
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: this.maxReceiveCount },
      removalPolicy: RemovalPolicy.DESTROY,
    });
  }
}
