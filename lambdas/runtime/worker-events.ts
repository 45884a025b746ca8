import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Logger } from '@aws-lambda-powertools/logger';
import { ChangeMessageVisibilityCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { parseOutboxMessage } from '../outbox/outbox-event';
import { OutboxDefaults } from '../core/outbox-budget';
import { logRun, type ReconcileReport } from '../reconciler/reconciler';
import type { Workers } from './workers';

/** SQS visibility timeouts are whole seconds, at most 12 hours (OutboxDefaults.maxRetryDelayMs). */
const MAX_VISIBILITY_SECONDS = OutboxDefaults.maxRetryDelayMs / 1000;

class RetryLater extends Error {
  constructor(reason: string) {
    super(`delivery not done: ${reason}`);
    this.name = 'RetryLater';
  }
}

/**
 * DynamoDB Streams (outbox INSERTs, filtered by the event source mapping) to the queue. A record whose event the
 * queue did not take is reported as a batch item failure, so the stream retries from it; the sweep is the net
 * under that too.
 */
export function createRelayHandler(workers: Pick<Workers, 'relay'>) {
  return async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
    const inserts = event.Records.flatMap((record) => {
      const image = record.eventName === 'INSERT' ? record.dynamodb?.NewImage : undefined;
      // Only our own: the event source's filter (deployed) already drops other endpoints' events; this is the same rule.
      const outboxEvent = image ? workers.relay.outbox.eventFromImage(image) : undefined;
      return outboxEvent ? [{ sequence: record.dynamodb?.SequenceNumber ?? '', outboxEvent }] : [];
    });
    const { failed } = await workers.relay.publish(inserts.map((i) => i.outboxEvent));
    const failedIds = new Set(failed);
    return {
      batchItemFailures: inserts.filter((i) => failedIds.has(i.outboxEvent.message.event_id)).map((i) => ({ itemIdentifier: i.sequence })),
    };
  };
}

/**
 * The outbox consumer on an SQS batch, with partial batch failure reporting (Powertools batch). Records run one
 * after another, so two copies of one event in a batch meet as a settled claim, not as a live one. A record to
 * retry gets its visibility set to the consumer's delay before it is reported; one whose delivery budget is spent
 * is moved to the dead-letter queue by the consumer itself (the queue's redrive count is only a backstop, sized to
 * outlast the budget).
 */
export function createConsumerHandler(workers: Pick<Workers, 'consumer' | 'sqs' | 'queueUrl' | 'deadLetterQueueUrl'>, logger: Logger) {
  const handleRecord = async (record: SQSRecord) => {
    const message = parseOutboxMessage(record.body);
    const receiveCount = Number(record.attributes?.ApproximateReceiveCount ?? '1');
    const outcome = await workers.consumer.consume(message, Number.isFinite(receiveCount) ? receiveCount : 1);
    if (outcome.kind === 'dead-letter') {
      if (!workers.deadLetterQueueUrl) {
        // The event's state in the table records the outcome (FAILED, or pending for the sweep): nothing is lost.
        logger.error('no dead-letter queue configured; the message is dropped', { event_id: message.event_id });
        return;
      }
      // Sent before it is acknowledged: if the send fails, the message stays and the next receive tries again.
      await workers.sqs.send(new SendMessageCommand({ QueueUrl: workers.deadLetterQueueUrl, MessageBody: record.body }));
      return;
    }
    if (outcome.kind !== 'retry') return;
    if (workers.queueUrl) {
      const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(outcome.delayMs / 1000));
      try {
        await workers.sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: workers.queueUrl,
            ReceiptHandle: record.receiptHandle,
            VisibilityTimeout: seconds,
          }),
        );
      } catch (err) {
        // The queue's own visibility timeout applies instead: a later retry, never a lost one.
        logger.warn('could not set the retry delay of a message', { event_id: message.event_id, error_name: (err as Error)?.name });
      }
    }
    throw new RetryLater(outcome.reason);
  };
  // A processor per batch: it keeps the batch's successes and failures, so two batches must not share one.
  return async (event: SQSEvent): Promise<SQSBatchResponse> =>
    processPartialResponse(event, handleRecord, new BatchProcessor(EventType.SQS), {
      processInParallel: false,
      throwOnFullBatchFailure: false,
    });
}

/**
 * One reconciler run per invocation (EventBridge schedule deployed, a timer locally).
 */
export function createReconcilerHandler(workers: Pick<Workers, 'reconciler'>, logger: Logger) {
  return async (): Promise<ReconcileReport> => logRun(logger, await workers.reconciler.runOnce());
}
