import type { ToolDefinition } from 'idempotent-mcp/mcp';
import { createOrderTool } from './create-order';
import { createTicketTool } from './create-ticket';
import { getOrderTool } from './get-order';
import { requestPaymentTool } from './request-payment';
import { sendEmailTool } from './send-email';
import { reserveStockTool } from './reserve-stock';

/** The reference endpoint's clients (the payments provider), added for its tools and their reconcile hooks. */
export { withReferenceClients as withClients } from './services';

/**
 * The reference endpoint's own tools. The toolkit serves get_operation_status and issue_operation_id beside them.
 * Add a tool: one file in this folder, its import and one line here.
 */
export const tools: readonly ToolDefinition[] = [
  createOrderTool,
  getOrderTool,
  requestPaymentTool,
  sendEmailTool,
  createTicketTool,
  reserveStockTool,
];
