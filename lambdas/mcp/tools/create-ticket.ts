import * as z from 'zod';
import { defineWriteTool, type WriteToolContext } from 'idempotent-mcp/mcp';
import { EventType } from './deliveries';
import { OUTBOX_TOOL_NOTE, outboxToolNeverCommitted, queueEffect, queuedSchema } from './outbox-tool';
import type { OutboxServices } from './services';

export const createTicketTool = defineWriteTool({
  name: 'create_ticket',
  title: 'Create ticket',
  description: `Opens a ticket in the ticket system. ${OUTBOX_TOOL_NOTE}`,
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
  async execute(args, ctx: WriteToolContext<OutboxServices>) {
    return queueEffect(EventType.CreateTicket, args, ctx);
  },
  reconcile: outboxToolNeverCommitted,
});
