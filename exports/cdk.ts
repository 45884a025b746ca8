/**
 * `idempotent-mcp/cdk`: the constructs. `IdempotentMcpEndpoint` is the whole endpoint around your own tools
 * module; the others are its parts, for a layout of your own.
 */
export { StackOutput } from '../lib/stack-outputs';
export {
  IdempotentMcpEndpoint,
  type IdempotentMcpEndpointProps,
  type EndpointSettings,
  type EndpointFunctions,
  type ApprovalPageSettings,
} from '../lib/endpoint';
export { IdempotentMcpGateway, type IdempotentMcpGatewayProps, type GatewayUpstream } from '../lib/gateway-construct';
export { ApprovalPageApi, type ApprovalPageApiProps } from '../lib/constructs/approval-page';
export {
  Auth,
  TOOLS_SCOPE,
  PERSON_TENANT_ATTRIBUTE,
  type ApprovalSignIn,
  type AuthProps,
  type ExternalOidcSettings,
  type TokenVerification,
} from '../lib/constructs/auth';
export { IdempotencyTable, type IdempotencyTableProps, type TableItemAction } from '../lib/constructs/idempotency-store';
export { McpFunction, MCP_TABLE_ACTIONS, type McpFunctionProps } from '../lib/constructs/mcp-function';
export { Monitoring, ReconcilerMetric, type MonitoringProps } from '../lib/constructs/monitoring';
export {
  OutboxConsumerFunction,
  CONSUMER_TABLE_ACTIONS,
  DEFAULT_CONSUMER_TIMEOUT,
  type OutboxConsumerFunctionProps,
} from '../lib/constructs/outbox-consumer';
export { OutboxQueue, type OutboxQueueProps } from '../lib/constructs/outbox-queue';
export { OutboxRelayFunction, RELAY_TABLE_ACTIONS, type OutboxRelayFunctionProps } from '../lib/constructs/outbox-relay';
export {
  ReconcilerFunction,
  RECONCILER_TABLE_ACTIONS,
  DEFAULT_RECONCILE_PERIOD,
  type ReconcilerFunctionProps,
} from '../lib/constructs/reconciler';
export {
  ServiceFunction,
  type CommonFunctionProps,
  type FunctionNetwork,
  type FunctionOptions,
  type PowertoolsSettings,
  type ServiceFunctionProps,
} from '../lib/constructs/service-function';
