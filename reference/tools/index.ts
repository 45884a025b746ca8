import type { ToolDefinition } from 'idempotent-mcp/mcp';
import { createOrderTool } from './create-order';
import { createTicketTool } from './create-ticket';
import { getOperationStatusTool } from './get-operation-status';
import { getOrderTool } from './get-order';
import { issueOperationIdTool } from './issue-operation-id';
import { requestPaymentTool } from './request-payment';
import { sendEmailTool } from './send-email';

/** The reference endpoint's clients (the payments provider), added for its tools and their reconcile hooks. */
export { withReferenceClients as withClients } from './services';

/** Every tool the endpoint serves. Add a tool: one file in this folder, its import and one line here. */
export const tools: readonly ToolDefinition[] = [
  createOrderTool,
  getOrderTool,
  getOperationStatusTool,
  issueOperationIdTool,
  requestPaymentTool,
  sendEmailTool,
  createTicketTool,
];
