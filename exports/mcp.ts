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
  KeySource,
  OperationIdSigner,
  ProtocolEra,
  ReconcileServices,
  ToolAnswer,
  ToolCall,
  ToolDefinition,
  ToolRuntime,
  WriteToolDefinition,
} from '../lambdas/mcp/tool-types';
export { registerWriteTool, registerReadTool, type McpServerLike, type RegisterToolOptions } from '../lambdas/mcp/register-write-tool';
export { getOperationStatusTool } from '../lambdas/mcp/get-operation-status';
export { issueOperationIdTool } from '../lambdas/mcp/issue-operation-id';
export { serverInstructions } from '../lambdas/mcp/served-tools';
export { createToolRuntime, type ToolRuntimeOptions } from '../lambdas/mcp/tool-runtime';
export type { Confirmation } from '../lambdas/mcp/confirmation-choice';
export { readErrorText } from '../lambdas/core/result-contract';
export { approvalPage, type ApprovalPageOptions } from '../lambdas/http/public-approval-page';
export {
  queueEffect,
  queuedSchema,
  outboxToolNeverCommitted,
  type OutboxRuntime,
  type Queued,
} from '../lambdas/mcp/outbox-tool';
export type { DeliveryContext, DeliveryHandler } from '../lambdas/outbox/consumer';
export type { ClientsOf, ToolsModule, WithClients } from '../lambdas/mcp/tools-module';
export { startReconciler, type ReconcilerOptions, type RunningReconciler } from '../lambdas/reconciler/start';
export type { ReconcileReport } from '../lambdas/reconciler/reconciler';
export type { SweepReport } from '../lambdas/outbox/relay';
export type { IssuedOperationId, OperationIdBinding, OperationIdCheck } from '../lambdas/core/operation-id';
export type { ConfirmationStateCheck } from '../lambdas/confirmation/core/round-state';
export type { Caller } from '../lambdas/auth/verifier';
export type { ToolkitLogger } from '../lambdas/observability/logger';
export type { EmfMetricsOptions, MetricsPublisher, MetricUnitName } from '../lambdas/observability/metrics';
