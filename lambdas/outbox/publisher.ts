import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { OutboxMessage } from './outbox-event';

/** Puts outbox messages on the queue. Returns the event ids that were not accepted (to be tried again). */
export interface EventPublisher {
  publish(messages: OutboxMessage[]): Promise<{ failed: string[] }>;
}

const SQS_BATCH = 10;

export class SqsEventPublisher implements EventPublisher {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async publish(messages: OutboxMessage[]): Promise<{ failed: string[] }> {
    const failed: string[] = [];
    for (let i = 0; i < messages.length; i += SQS_BATCH) {
      const batch = messages.slice(i, i + SQS_BATCH);
      try {
        const out = await this.sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: this.queueUrl,
            // Entry ids must be unique within the batch only; the event id travels in the body.
            Entries: batch.map((message, index) => ({ Id: String(index), MessageBody: JSON.stringify(message) })),
          }),
        );
        for (const failure of out.Failed ?? []) {
          const message = batch[Number(failure.Id)];
          if (message) failed.push(message.event_id);
        }
      } catch {
        failed.push(...batch.map((m) => m.event_id));
      }
    }
    return { failed };
  }
}
