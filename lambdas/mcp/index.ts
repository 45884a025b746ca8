/**
 * `idempotent-mcp/mcp`: define idempotent write tools and read tools, and serve them over MCP (on your own
 * McpServer, or as the stateless per-request server), with the reconciler that settles their lost outcomes and the
 * approval page where a person approves what a `confirmation: 'approval'` tool does. The Lambda wiring is
 * `idempotent-mcp/lambda`.
 */
export { defineWriteTool, toCallToolResult, writeResultSchema, type WriteToolContext, type WriteToolSpec } from './define-write-tool';
export { defineReadTool, ReadToolError, type ReadToolContext, type ReadToolSpec } from './define-read-tool';
export { isWriteTool, type KeySource, type ProtocolEra, type ReconcileServices, type ToolAnswer, type ToolCall, type ToolDefinition, type ToolRuntime, type WriteToolDefinition, type OperationIdSigner, type ConfirmationSigner, type UrlElicitationRequired } from './tool-types';
export { registerWriteTool, registerReadTool, type McpServerLike, type RegisterToolOptions, type RegisterWriteToolOptions } from './register-write-tool';
export { getOperationStatusTool } from './get-operation-status';
export { issueOperationIdTool } from './issue-operation-id';
export { serverInstructions } from './served-tools';
export { createToolRuntime, type ToolRuntimeOptions } from './tool-runtime';
export { CONFIRM_INPUT } from './confirmation';
export { APPROVALS_PATH } from '../core/endpoint-paths';
export type { Confirmation } from '../core/confirmation-choice';
export { approvalPage, type ApprovalPageOptions } from '../http/public-approval-page';
export { queueEffect, queuedSchema, outboxToolNeverCommitted, OUTBOX_TOOL_NOTE, type OutboxRuntime, type Queued } from './outbox-tool';
export { createMcpRequestHandler, type McpRequestHandler, type McpRequestOptions } from './http-handler';
export { buildMcpServer, SERVER_INFO, type BuildServerOptions } from './server';
export { parseArguments, describeIssues, type ParsedArguments } from './arguments';
export type { DeliveryContext, DeliveryHandler } from '../outbox/consumer';
export type { ToolsModule, WithClients, ClientsOf } from './tools-module';
export { startReconciler, reconcileOnce, DEFAULT_RECONCILE_INTERVAL_MS, type OwnReconcilerOptions, type RunningReconciler } from '../reconciler/start';
export type { ReconcileReport } from '../reconciler/reconciler';
export { stderrLogger, type StderrLoggerOptions, type ToolkitLogger, type LogLevel } from '../observability/logger';
export { emfMetrics, type EmfMetricsOptions, type MetricsPublisher } from '../observability/metrics';
