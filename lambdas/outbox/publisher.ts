import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { OutboxMessage } from './outbox-event';

/**
 * Puts outbox messages on the queue. Returns the event ids that were not accepted (to be tried again).
 *
 * @public
 */
export interface EventPublisher {
  /** Sends `messages`; `failed`: the event ids not accepted, to be sent again (empty when all were). */
  publish(messages: OutboxMessage[]): Promise<{ failed: string[] }>;
}

const SQS_BATCH = 10;
/**
 * Bytes per SendMessageBatch: SQS refuses a whole batch whose bodies add up to more than the queue's limit (256 KiB on
 * older queues), so ten large events sent together would all fail, on every attempt. A larger message goes alone.
 */
const SQS_BATCH_BYTES = 256 * 1024;

/**
 * SQS refuses bodies with characters outside #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF (U+FFFE and
 * U+FFFF are valid JSON text, and some local SQS servers also refuse astral characters such as emoji). Written as
 * JSON escapes they are plain ASCII, and JSON.parse gives back the same string.
 */
const UNSAFE_FOR_SQS = /[\uD800-\uDFFF\uFFFE\uFFFF]/g;

export function encodeMessageBody(message: OutboxMessage): string {
  return JSON.stringify(message).replace(UNSAFE_FOR_SQS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Groups of at most ten messages and at most SQS_BATCH_BYTES each (a single larger message forms its own group). */
function batchesOf(messages: OutboxMessage[]): Array<Array<{ message: OutboxMessage; body: string }>> {
  const batches: Array<Array<{ message: OutboxMessage; body: string }>> = [];
  let current: Array<{ message: OutboxMessage; body: string }> = [];
  let bytes = 0;
  for (const message of messages) {
    const body = encodeMessageBody(message);
    const size = Buffer.byteLength(body, 'utf8');
    if (current.length > 0 && (current.length === SQS_BATCH || bytes + size > SQS_BATCH_BYTES)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push({ message, body });
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

export class SqsEventPublisher implements EventPublisher {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async publish(messages: OutboxMessage[]): Promise<{ failed: string[] }> {
    const failed: string[] = [];
    for (const batch of batchesOf(messages)) {
      try {
        const out = await this.sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: this.queueUrl,
            // Entry ids must be unique within the batch only; the event id travels in the body.
            Entries: batch.map(({ body }, index) => ({ Id: String(index), MessageBody: body })),
          }),
        );
        for (const failure of out.Failed ?? []) {
          const entry = batch[Number(failure.Id)];
          if (entry) failed.push(entry.message.event_id);
        }
      } catch {
        failed.push(...batch.map((e) => e.message.event_id));
      }
    }
    return { failed };
  }
}
