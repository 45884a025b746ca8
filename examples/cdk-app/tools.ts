import { randomUUID } from 'node:crypto';
import {
  defineWriteTool,
  outboxToolNeverCommitted,
  queueEffect,
  queuedSchema,
  type OutboxRuntime,
  type WriteToolContext,
} from 'idempotent-mcp/mcp';
import * as z from 'zod';

/**
 * The team's own write tool. The endpoint adds `idempotency_key` to its input, runs `execute` at most once per key
 * and tenant, and replays the first result to every retry. The reservation item commits in the same transaction as
 * that result, so there is never one without the other.
 */
const reserveRoom = defineWriteTool({
  name: 'rooms.reserve',
  title: 'Reserve a meeting room',
  description: 'Reserves a meeting room for a time slot. Returns the reservation.',
  input: {
    room: z
      .string()
      .regex(/^[A-Za-z0-9-]{1,32}$/)
      .describe('Room id, for example "berlin-3".'),
    starts_at: z.iso.datetime().describe('Start of the slot, ISO 8601.'),
    minutes: z.number().int().min(15).max(480),
  },
  result: z.object({ reservation_id: z.string(), room: z.string(), starts_at: z.string(), minutes: z.number() }),
  annotations: { destructiveHint: false, openWorldHint: false },
  async execute(args, ctx) {
    const reservation = { reservation_id: `res_${randomUUID()}`, ...args };
    return {
      result: reservation,
      writes: [
        { create: { key: { pk: `RESERVATION#${ctx.tenant}#${reservation.reservation_id}`, sk: 'RESERVATION' }, item: reservation } },
      ],
    };
  },
});

/**
 * A tool whose effect happens elsewhere (a chat message): it commits an outbox event with its record, and the
 * endpoint's consumer delivers it once through the handler for its type in ./deliveries.ts.
 */
const announceRoom = defineWriteTool({
  name: 'rooms.announce',
  title: 'Announce a reservation',
  description: 'Posts a reservation to the team chat. The message is queued and delivered once.',
  input: { reservation_id: z.string().min(1).max(64), text: z.string().min(1).max(500) },
  result: queuedSchema,
  annotations: { destructiveHint: false, openWorldHint: true },
  // Its whole effect is the event committed with the record.
  effect: 'local',
  async execute(args, ctx: WriteToolContext<OutboxRuntime>) {
    return queueEffect('room.announce', args, ctx);
  },
  reconcile: outboxToolNeverCommitted,
});

export const tools = [reserveRoom, announceRoom];
