/**
 * `idempotent-mcp/cdk`: the constructs. `IdempotentMcpEndpoint` is the whole endpoint around your own tools
 * module; the others are its parts, for a layout of your own.
 */
export { IdempotentMcpStack, type IdempotentMcpStackProps } from './idempotent-mcp-stack';
export { Auth, TOOLS_SCOPE, type AuthProps, type ExternalOidcSettings, type TokenVerification } from './constructs/auth';
export { validateDownstreams, downstreamEnvironment, type DownstreamSettings } from './constructs/downstreams';
export { IdempotencyStore, type IdempotencyStoreProps, type TableItemAction } from './constructs/idempotency-store';
export { McpFunction, MCP_TABLE_ACTIONS, type McpFunctionProps } from './constructs/mcp-function';
export { Monitoring, ReconcilerMetric, type MonitoringProps } from './constructs/monitoring';
export { OutboxConsumer, CONSUMER_TABLE_ACTIONS, DEFAULT_CONSUMER_TIMEOUT, type OutboxConsumerProps } from './constructs/outbox-consumer';
export { OutboxQueue, type OutboxQueueProps } from './constructs/outbox-queue';
export { OutboxRelay, RELAY_TABLE_ACTIONS, type OutboxRelayProps } from './constructs/outbox-relay';
export { Reconciler, RECONCILER_TABLE_ACTIONS, DEFAULT_RECONCILE_PERIOD, type ReconcilerProps } from './constructs/reconciler';
export { SandboxDownstreams, type SandboxDownstreamsProps } from './constructs/sandbox-downstreams';
export { ServiceFunction, type CommonFunctionProps, type PowertoolsSettings, type ServiceFunctionProps } from './constructs/service-function';
export { IdempotentMcpChecks } from './nag-checks';
export { settingsFromContext, ContextKey, type AppSettings } from './context';
