import type { Logger } from '@aws-lambda-powertools/logger';
import { systemClock, type Clock } from '../core/clock';
import { countForTool, MetricName } from '../observability/metrics';
import { OutboxDefaults } from '../core/outbox-budget';
import type { OutboxStore, StoredOutboxEvent } from './outbox-store';
import type { EventPublisher } from './publisher';

/**
 * The outbox relay's parts and tuning: the outbox, the publisher, logger and clock, when it sends again, how often at most.
 */
export interface RelayOptions {
  outbox: OutboxStore;
  publisher: EventPublisher;
  logger: Logger;
  clock?: Clock;
  /** The sweep looks again at a sent, undelivered event after this long, doubling per send. */
  redeliverAfterMs?: number;
  /** Sends without a delivery before the sweep gives up on an event. */
  maxSends?: number;
}

/**
 * Moves committed outbox events to the queue. `publish` serves the DynamoDB Streams handler (events as they commit);
 * `sweep` is the safety net that finds, through the attention index, every pending event whose next look is due:
 * one the stream relay never sent (it crashed, the queue refused it) or one sent but never delivered (a lost
 * message). Both schedule the next look after each send, so an event is re-sent with backoff until the consumer
 * settles it, and never dropped: after `maxSends` it is marked FAILED, logged and counted. A send the queue refuses
 * is tried again with the same backoff, without limit (nothing reached the queue, so nothing is given up).
 * Sending twice is harmless: the consumer deduplicates by event id.
 */
export class OutboxRelay {
  /** Whose events it sends: the store's `keyPrefix` (the stream handler reads images through it). */
  readonly outbox: OutboxStore;
  private readonly publisher: EventPublisher;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly redeliverAfterMs: number;
  private readonly maxSends: number;

  constructor(options: RelayOptions) {
    this.outbox = options.outbox;
    this.publisher = options.publisher;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.redeliverAfterMs = options.redeliverAfterMs ?? OutboxDefaults.redeliverAfterMs;
    this.maxSends = options.maxSends ?? OutboxDefaults.maxSends;
  }

  /** When to look again after the n-th send (exponential, capped). */
  nextLookAfter(sends: number): number {
    return Math.min(this.redeliverAfterMs * 2 ** Math.max(0, sends - 1), OutboxDefaults.redeliverMaxBackoffMs);
  }

  /** Sends pending events; returns the ids the queue did not take (the caller retries them, or the sweep will). */
  async publish(events: StoredOutboxEvent[]): Promise<{ sent: string[]; failed: string[] }> {
    const pending = events.filter((e) => e.status === 'PENDING');
    if (pending.length === 0) return { sent: [], failed: [] };
    const { failed } = await this.publisher.publish(pending.map((e) => e.message));
    const failedIds = new Set(failed);
    const sent = pending.filter((e) => !failedIds.has(e.message.event_id));
    const now = this.clock();
    await Promise.all(
      sent.map(async (event) => {
        const id = event.message.event_id;
        countForTool(event.sendCount === 0 ? MetricName.OutboxSent : MetricName.OutboxResent, event.message.tool);
        try {
          await this.outbox.recordSend(id, now + this.nextLookAfter(event.sendCount + 1), now);
        } catch (err) {
          // The message is on the queue; without this write the sweep sends it once more, which is harmless.
          this.logger.warn('could not record an outbox send', { event_id: id, error_name: (err as Error)?.name });
        }
      }),
    );
    // Still pending, never dropped; the next try backs off like a re-send, so an event the queue keeps refusing (a
    // misconfigured queue, a message it will not take) costs a request and a log line per backoff, not per sweep.
    await Promise.all(
      pending
        .filter((e) => failedIds.has(e.message.event_id))
        .map(async (event) => {
          const id = event.message.event_id;
          const refusals = event.refusedCount + 1;
          this.logger.warn('the queue did not accept an outbox event', { event_id: id, tool: event.message.tool, refusals });
          await this.outbox.recordRefusal(id, now + this.nextLookAfter(refusals)).catch((err: unknown) => {
            // Not recorded: the next sweep tries again without waiting, which is harmless.
            this.logger.warn('could not record an outbox refusal', { event_id: id, error_name: (err as Error)?.name });
          });
        }),
    );
    return { sent: sent.map((e) => e.message.event_id), failed };
  }

  /** How many events are pending (sent or not), for the reconciler's gauge. */
  pendingCount(): Promise<number> {
    return this.outbox.pendingCount();
  }

  /** One pass of the safety net over events due at or before `now - graceMs`: events sent, resent, failed, abandoned. */
  async sweep(
    options: { graceMs?: number; limit?: number } = {},
  ): Promise<{ sent: number; resent: number; failed: number; abandoned: number }> {
    const now = this.clock();
    const due = await this.outbox.dueEvents(now - (options.graceMs ?? 0), options.limit ?? 100);
    const exhausted = due.filter((e) => e.sendCount >= this.maxSends);
    const toSend = due.filter((e) => e.sendCount < this.maxSends);
    for (const event of exhausted) {
      const failed = await this.outbox.failEvent(
        event.message.event_id,
        { code: 'OUTBOX_UNDELIVERED', message: `not delivered after ${event.sendCount} sends to the queue` },
        now,
      );
      if (failed) {
        countForTool(MetricName.OutboxDeliveryFailed, event.message.tool);
        this.logger.error('outbox event abandoned after repeated sends', {
          event_id: event.message.event_id,
          tool: event.message.tool,
          tenant: event.message.tenant,
          key_hash: event.message.key_hash,
          sends: event.sendCount,
        });
      }
    }
    const { sent, failed } = await this.publish(toSend);
    const resent = toSend.filter((e) => e.sendCount > 0 && sent.includes(e.message.event_id)).length;
    return { sent: sent.length, resent, failed: failed.length, abandoned: exhausted.length };
  }
}
