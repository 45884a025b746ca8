/**
 * `idempotent-mcp/cdk`: the constructs. `IdempotentMcpEndpoint` is the whole endpoint around your own tools
 * module; the others are its parts, for a layout of your own.
 */
export { StackOutput } from './stack-outputs';
export { IdempotentMcpEndpoint, type IdempotentMcpEndpointProps, type EndpointSettings, type EndpointFunctions, type ApprovalPageSettings } from './endpoint';
export { IdempotentMcpGateway, type IdempotentMcpGatewayProps, type GatewayUpstream } from './gateway';
export { ApprovalPageApi, type ApprovalPageApiProps } from './constructs/approval-page';
export { Auth, TOOLS_SCOPE, PERSON_TENANT_ATTRIBUTE, type ApprovalSignIn, type AuthProps, type ExternalOidcSettings, type TokenVerification } from './constructs/auth';
export { IdempotencyTable, type IdempotencyTableProps, type TableItemAction } from './constructs/idempotency-store';
export { McpFunction, MCP_TABLE_ACTIONS, type McpFunctionProps } from './constructs/mcp-function';
export { Monitoring, ReconcilerMetric, type MonitoringProps } from './constructs/monitoring';
export { OutboxConsumerFunction, CONSUMER_TABLE_ACTIONS, DEFAULT_CONSUMER_TIMEOUT, type OutboxConsumerFunctionProps } from './constructs/outbox-consumer';
export { OutboxQueue, type OutboxQueueProps } from './constructs/outbox-queue';
export { OutboxRelayFunction, RELAY_TABLE_ACTIONS, type OutboxRelayFunctionProps } from './constructs/outbox-relay';
export { ReconcilerFunction, RECONCILER_TABLE_ACTIONS, DEFAULT_RECONCILE_PERIOD, type ReconcilerFunctionProps } from './constructs/reconciler';
export {
  ServiceFunction,
  type CommonFunctionProps,
  type FunctionNetwork,
  type FunctionOptions,
  type PowertoolsSettings,
  type ServiceFunctionProps,
} from './constructs/service-function';
