import * as z from 'zod';
import { newOutboxMessage } from 'idempotent-mcp/dynamodb';
import type { Execution, ReconcileFinding } from 'idempotent-mcp/engine';
import type { WriteToolContext } from 'idempotent-mcp/mcp';
import type { OutboxServices } from './services';

/** What an outbox tool answers: the effect is queued under `event_id`; get_operation_status shows its delivery. */
export const queuedSchema = z.object({
  status: z.literal('queued'),
  event_id: z.string().describe('The queued effect; get_operation_status shows whether it was delivered.'),
});
export type Queued = z.infer<typeof queuedSchema>;

export const OUTBOX_TOOL_NOTE =
  'The effect is queued in the same transaction that records this call and delivered exactly once shortly after; ' +
  'the result says queued with an event_id, and get_operation_status shows the delivery (pending, delivered, failed).';

/** Commits the event with the SUCCEEDED record: it exists if and only if the call succeeded. */
export function queueEffect(type: string, payload: Record<string, unknown>, ctx: WriteToolContext<OutboxServices>): Execution<Queued> {
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
 */
export async function outboxToolNeverCommitted(): Promise<ReconcileFinding> {
  return { kind: 'absent' };
}
