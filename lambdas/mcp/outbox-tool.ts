import * as z from 'zod';
import type { ReconcileFinding } from '../core/reconcile';
import type { Execution } from '../engine/write-request';
import type { ExtraWrite } from '../engine/persistence';
import { newOutboxMessage, type OutboxMessage } from '../outbox/outbox-event';
import type { WriteToolContext } from './define-write-tool';
import type { ToolRuntime } from './tool-types';

/**
 * What a tool that queues an effect needs besides the tool runtime: the outbox (the endpoint's services have it)
 * and new event ids.
 * @public
 */
export interface OutboxRuntime extends ToolRuntime {
  /** The outbox's write of one event, committed with the tool's record (the endpoint's outbox). */
  outbox: { eventWrite(message: OutboxMessage): ExtraWrite };
  /** A new, unique event id (the endpoint's: `evt_` and a random UUID); the consumer dedups deliveries by it. */
  newEventId(): string;
}

/**
 * What an outbox tool answers: the effect is queued under `event_id`; get_operation_status shows its delivery.
 *
 * @public
 */
export const queuedSchema = z.object({
  status: z.literal('queued'),
  event_id: z.string().describe('The queued effect; get_operation_status shows whether it was delivered.'),
});

export const OUTBOX_TOOL_NOTE =
  'The effect is queued in the same transaction that records this call and delivered exactly once shortly after; ' +
  'the result says queued with an event_id, and get_operation_status shows the delivery (pending, delivered, failed).';

/**
 * Commits an outbox event of `type` with the SUCCEEDED record: it exists if and only if the call succeeded, and
 * the outbox consumer delivers it once (its handler for `type`). For a tool with `effect: 'local'` and
 * `result: queuedSchema`.
 * @public
 */
export function queueEffect(
  type: string,
  payload: Record<string, unknown>,
  ctx: WriteToolContext<OutboxRuntime>,
): Execution<z.infer<typeof queuedSchema>> {
  const { services } = ctx;
  const message = newOutboxMessage({
    eventId: services.newEventId(),
    type,
    tenant: ctx.tenant,
    tool: ctx.tool,
    idempotencyKey: ctx.idempotencyKey,
    payload,
    now: ctx.now(),
  });
  return { result: { status: 'queued', event_id: message.event_id }, writes: [services.outbox.eventWrite(message)] };
}

/**
 * An outbox tool's record can only be UNKNOWN if its completion transaction did not commit (a committed one is
 * SUCCEEDED, and every later write is conditional on PROCESSING): then no event exists and nothing was sent.
 * @public
 */
export async function outboxToolNeverCommitted(): Promise<ReconcileFinding> {
  return { kind: 'absent' };
}
