import * as z from 'zod';
import {
  defineWriteTool,
  outboxToolNeverCommitted,
  queueEffect,
  queuedSchema,
  type OutboxRuntime,
  type WriteToolContext,
} from 'idempotent-mcp/mcp';
import { QUEUED_NOTE } from './queued-note';
import { EventType } from './deliveries';

export const createTicketTool = defineWriteTool({
  name: 'create_ticket',
  title: 'Create ticket',
  description: `Opens a ticket in the ticket system. ${QUEUED_NOTE}`,
  input: {
    title: z.string().min(1).max(300),
    description: z.string().max(20_000),
    priority: z.enum(['low', 'normal', 'high', 'urgent']),
  },
  result: queuedSchema,
  annotations: { destructiveHint: false, openWorldHint: true },
  idempotency: { reexecuteSafe: true },
  // Its whole effect is the outbox event committed with the record: one request.
  effect: 'local',
  async execute(args, ctx: WriteToolContext<OutboxRuntime>) {
    return queueEffect(EventType.CreateTicket, args, ctx);
  },
  reconcile: outboxToolNeverCommitted,
});
