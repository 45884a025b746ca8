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

export const sendEmailTool = defineWriteTool({
  name: 'send_email',
  title: 'Send email',
  description: `Sends a plain-text email to one recipient. ${QUEUED_NOTE}`,
  input: {
    to: z.email().max(254).describe('Recipient address.'),
    subject: z.string().min(1).max(200),
    body: z.string().min(1).max(50_000).describe('Plain text.'),
  },
  result: queuedSchema,
  // Sends a message out of this service; destroys nothing.
  annotations: { destructiveHint: false, openWorldHint: true },
  // The only effect of running it is the committed event, so a stale execution may be re-run.
  idempotency: { reexecuteSafe: true },
  // Its whole effect is the outbox event committed with the record: one request.
  effect: 'local',
  async execute(args, ctx: WriteToolContext<OutboxRuntime>) {
    return queueEffect(EventType.SendEmail, args, ctx);
  },
  reconcile: outboxToolNeverCommitted,
});
