/**
 * `idempotent-mcp/mcp`: define idempotent write tools and read tools, and serve them over MCP (the stateless
 * Request -> Response app the Lambda and `npm start` use).
 */
export { defineWriteTool, toCallToolResult, writeResultSchema, type WriteToolContext, type WriteToolSpec } from './define-write-tool';
export { defineReadTool, ReadToolError, type ReadToolContext, type ReadToolSpec } from './define-read-tool';
export { isWriteTool, type KeySource, type ProtocolEra, type ReconcileServices, type ToolAnswer, type ToolCall, type ToolDefinition, type ToolRuntime, type WriteToolDefinition } from './tool-types';
export { registerWriteTool, type RegisterWriteToolOptions } from './register-write-tool';
export { createToolRuntime, type ToolRuntimeOptions } from './tool-runtime';
export { CONFIRM_INPUT, type Confirmation } from './confirmation';
export { queueEffect, queuedSchema, outboxToolNeverCommitted, OUTBOX_TOOL_NOTE, type OutboxRuntime, type Queued } from './outbox-tool';
export { createMcpRequestHandler, type McpRequestHandler, type McpRequestOptions } from './http-handler';
export { buildMcpServer, SERVER_INFO, type BuildServerOptions } from './server';
export { createApp, MCP_PATH, MAX_BODY_BYTES, PROTECTED_RESOURCE_METADATA_PATH, type AppOptions, type AppServices } from '../http/app';
export { createLambdaHandler } from '../http/lambda';
export { createServices, type ConfirmationSigner, type OperationIdSigner, type ServiceOverrides, type Services } from '../runtime/services';
export { createWorkerServices, type WorkerServiceOverrides, type WorkerServices } from '../runtime/worker-services';
export {
  createConsumer,
  createReconciler,
  createRelay,
  createWorkers,
  type ConsumerOverrides,
  type ConsumerServices,
  type OutboxQueue,
  type ReconcilerOverrides,
  type ReconcilerServices,
  type RelayOverrides,
  type RelayServices,
  type WorkerOverrides,
  type Workers,
} from '../runtime/workers';
export { createConsumerSqsHandler, createReconcilerHandler, createRelayStreamHandler } from '../runtime/worker-handlers';
export { loadConfig, loadWorkerConfig, loadAuthConfig, ConfigError, EnvVars, environmentOf, read, type AppConfig, type WorkerConfig, type AuthConfig, type Env, type EnvVar, type EnvSettings } from '../config';
export { createTokenVerifier, AuthenticationError, AuthUnavailableError, type Caller, type TokenVerifier } from '../auth/verifier';
export { withMetrics, countForTool, MetricName } from '../observability/metrics';
export { SecretUnavailableError } from '../runtime/operation-id-secret';
export { devIssuerFor, loadDevIssuer, DEV_TOKEN_TTL_SECONDS, type DevIssuer } from '../auth/dev-issuer';
export { DEV_KEY_FILE } from '../auth/dev-keys';
export { parseArguments, describeIssues, type ParsedArguments } from './arguments';
export type { DeliveryContext, DeliveryHandler } from '../outbox/consumer';
