/**
 * `idempotent-mcp/mcp`: define idempotent write tools and read tools, and serve them over MCP (on your own
 * McpServer, or as the stateless per-request server), with the reconciler that settles their lost outcomes and the
 * approval page where a person approves what a `confirmation: 'approval'` tool does. The Lambda wiring is
 * `idempotent-mcp/lambda`.
 */
export { defineWriteTool, type WriteToolContext, type WriteToolSpec } from '../lambdas/mcp/define-write-tool';
export { defineReadTool, ReadToolError, type ReadToolContext, type ReadToolSpec } from '../lambdas/mcp/define-read-tool';
export type {
  ConfirmationSigner,
  OperationIdSigner,
  ToolCall,
  ToolDefinition,
  ToolRuntime,
  WriteToolDefinition,
} from '../lambdas/mcp/tool-types';
export { registerWriteTool, registerReadTool, type McpServerLike, type RegisterToolOptions } from '../lambdas/mcp/register-write-tool';
export { getOperationStatusTool } from '../lambdas/mcp/get-operation-status';
export { issueOperationIdTool } from '../lambdas/mcp/issue-operation-id';
export { serverInstructions } from '../lambdas/mcp/served-tools';
export { createToolRuntime } from '../lambdas/mcp/tool-runtime';
export { approvalPage } from '../lambdas/http/public-approval-page';
export { queueEffect, queuedSchema, outboxToolNeverCommitted, type OutboxRuntime } from '../lambdas/mcp/outbox-tool';
export type { DeliveryHandler } from '../lambdas/outbox/consumer';
export type { ToolsModule } from '../lambdas/mcp/tools-module';
export { startReconciler } from '../lambdas/reconciler/start';
export type { ReconcileReport } from '../lambdas/reconciler/reconciler';
export type { Caller } from '../lambdas/auth/verifier';
