/**
 * `idempotent-mcp/cdk`: the constructs. `IdempotentMcpEndpoint` is the whole endpoint around your own tools module,
 * `IdempotentMcpGateway` the same in front of an MCP server you cannot change; the others are their parts, as the
 * endpoint holds them, and `ServiceFunction` is the Lambda function they build theirs with, for one of your own.
 */
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
  type ApprovalSignIn,
  type AuthProps,
  type ExternalOidcSettings,
  type TokenVerification,
} from '../lib/constructs/auth';
export { IdempotencyTable, type IdempotencyTableProps, type TableItemAction } from '../lib/constructs/idempotency-store';
export { McpFunction, type McpFunctionProps } from '../lib/constructs/mcp-function';
export { Monitoring, type MonitoringProps } from '../lib/constructs/monitoring';
export { OutboxConsumerFunction, type OutboxConsumerFunctionProps } from '../lib/constructs/outbox-consumer';
export { OutboxQueue, type OutboxQueueProps } from '../lib/constructs/outbox-queue';
export { OutboxRelayFunction, type OutboxRelayFunctionProps } from '../lib/constructs/outbox-relay';
export { ReconcilerFunction, type ReconcilerFunctionProps } from '../lib/constructs/reconciler';
export {
  ServiceFunction,
  type CommonFunctionProps,
  type FunctionNetwork,
  type FunctionOptions,
  type PowertoolsSettings,
  type ServiceFunctionProps,
} from '../lib/constructs/service-function';
