import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { OutboxDefaults, receivesWithinBudget } from '../../lambdas/core/outbox-budget';

/** AWS: the source queue's visibility timeout should be at least six times the consuming function's timeout. */
const VISIBILITY_TO_CONSUMER_TIMEOUT = 6;

/**
 * Props of `OutboxQueue`: the consumer's timeout and batching window, the visibility timeout, the delivery budget and redrive, encryption.
 */
export interface OutboxQueueProps {
  /** The consumer function's timeout; the visibility timeout is derived from it. */
  readonly consumerTimeout: Duration;
  /**
   * The event source's batching window, added to the visibility timeout.
   * @default none
   */
  readonly maxBatchingWindow?: Duration;
  /**
   * Explicit visibility timeout; must be at least six times the consumer timeout plus the batching window.
   * @default exactly that
   */
  readonly visibilityTimeout?: Duration;
  /**
   * How long the consumer retries a delivery the downstream refuses for now (from the event's commit) before it
   * moves the message to the dead-letter queue; at most 13 days.
   * @default Duration.hours(24)
   */
  readonly deliveryBudget?: Duration;
  /**
   * The redrive count, a backstop (a consumer that crashes on a message): never below what the delivery budget
   * needs (receivesWithinBudget), at most 1000.
   * @default exactly what the delivery budget needs
   */
  readonly maxReceiveCount?: number;
  /**
   * Customer managed key.
   * @default SQS managed encryption (SSE-SQS, no key cost)
   */
  readonly encryptionKey?: kms.IKey;
  /**
   * How long the dead-letter queue keeps a message for a person to look at.
   * @default Duration.days(14) (the maximum)
   */
  readonly deadLetterRetention?: Duration;
}

/**
 * The outbox queue and its dead-letter queue. Both encrypted and TLS-only; a message whose delivery keeps failing
 * is moved to the dead-letter queue by the consumer once its delivery budget is spent (and raises the DLQ alarm).
 */
export class OutboxQueue extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly maxReceiveCount: number;
  readonly deliveryBudget: Duration;

  constructor(scope: Construct, id: string, props: OutboxQueueProps) {
    super(scope, id);
    const minimum = props.consumerTimeout.toSeconds() * VISIBILITY_TO_CONSUMER_TIMEOUT + (props.maxBatchingWindow?.toSeconds() ?? 0);
    const visibilityTimeout = props.visibilityTimeout ?? Duration.seconds(minimum);
    if (visibilityTimeout.toSeconds() < minimum) {
      throw new Error(
        `OutboxQueue: visibilityTimeout ${visibilityTimeout.toSeconds()} s is below ${minimum} s (6 x the consumer timeout + batching window): a slow batch would be delivered twice while still running`,
      );
    }
    this.deliveryBudget = props.deliveryBudget ?? Duration.seconds(OutboxDefaults.deliveryBudgetSeconds);
    const budgetSeconds = this.deliveryBudget.toSeconds();
    if (!Number.isInteger(budgetSeconds) || budgetSeconds < 1 || budgetSeconds > OutboxDefaults.maxDeliveryBudgetSeconds) {
      throw new Error(
        `OutboxQueue: deliveryBudget must be whole seconds from 1 s to ${OutboxDefaults.maxDeliveryBudgetSeconds / 86400} days`,
      );
    }
    // Each retry waits at least the backoff, so the budget bounds the receives; SQS must not run out of them first.
    const needed = receivesWithinBudget(budgetSeconds * 1000);
    this.maxReceiveCount = props.maxReceiveCount ?? needed;
    if (!Number.isInteger(this.maxReceiveCount) || this.maxReceiveCount < needed || this.maxReceiveCount > 1000) {
      throw new Error(
        `OutboxQueue: maxReceiveCount must be an integer from ${needed} (the receives a ${budgetSeconds} s delivery budget can take) to 1000`,
      );
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
      // The message must outlive its delivery budget on the queue.
      retentionPeriod: Duration.seconds(
        Math.min(Duration.days(14).toSeconds(), Math.max(Duration.days(4).toSeconds(), budgetSeconds + Duration.days(1).toSeconds())),
      ),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: this.maxReceiveCount },
      removalPolicy: RemovalPolicy.DESTROY,
    });
  }

  /** Sending to the queue (the relay, the reconciler's sweep): see sendOnly. */
  grantSend(grantee: iam.IGrantable): iam.Grant {
    return sendOnly(this.queue, grantee);
  }

  /** Sending to the dead-letter queue (the consumer, once a message's delivery budget is spent): see sendOnly. */
  grantSendToDeadLetterQueue(grantee: iam.IGrantable): iam.Grant {
    return sendOnly(this.deadLetterQueue, grantee);
  }
}

/**
 * sqs:SendMessage alone, which authorizes SendMessage and SendMessageBatch: CDK's grantSendMessages adds
 * GetQueueAttributes and GetQueueUrl, which no function calls (each is given the queue's URL). Under a customer
 * managed key, the two key actions SQS asks of a producer.
 */
function sendOnly(queue: sqs.IQueue, grantee: iam.IGrantable): iam.Grant {
  const grant = iam.Grant.addToPrincipal({ grantee, actions: ['sqs:SendMessage'], resourceArns: [queue.queueArn] });
  queue.encryptionMasterKey?.grant(grantee, 'kms:GenerateDataKey', 'kms:Decrypt');
  return grant;
}
