import type { ToolDefinition } from 'idempotent-mcp/mcp';
import type { ConfiguredDownstreams } from '../config';
import { createOrderTool } from './create-order';
import { createTicketTool } from './create-ticket';
import { getOrderTool } from './get-order';
import { requestPaymentTool } from './request-payment';
import { sendEmailTool } from './send-email';

/** The reference endpoint's clients (the payments provider), added for its tools and their reconcile hooks. */
export { withReferenceClients as withClients } from './services';

/**
 * The reference endpoint's own tools. The toolkit serves get_operation_status and issue_operation_id beside them.
 * Add a tool: one file in this folder, its import and one line here.
 */
// biome-ignore format: one tool a line, the list the README's "add a tool" patches.
export const tools: readonly ToolDefinition[] = [
  createOrderTool,
  getOrderTool,
  requestPaymentTool,
  sendEmailTool,
  createTicketTool,
];

/** The downstream each demo tool needs; the others (orders) need only the table. */
const NEEDS: Record<string, keyof ConfiguredDownstreams> = {
  [requestPaymentTool.name]: 'payments',
  [createTicketTool.name]: 'tickets',
  [sendEmailTool.name]: 'email',
};

/**
 * The demo tools a deployment serves: those whose downstream is configured. A tool that could never finish (an
 * email with no sender, a ticket with no ticket system) is not offered at all, rather than answering `queued`.
 */
export const servedTools = (configured: ConfiguredDownstreams): readonly ToolDefinition[] =>
  tools.filter((tool) => NEEDS[tool.name] === undefined || configured[NEEDS[tool.name]!]);
