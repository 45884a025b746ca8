/**
 * `idempotent-mcp/cdk`: the constructs. `IdempotentMcpEndpoint` is the whole endpoint around your own tools module,
 * `IdempotentMcpGateway` the same in front of an MCP server you cannot change; the settings types are what a team
 * sets on them, and `ServiceFunction` is the Lambda function they build theirs with, for one of your own.
 */
export {
  IdempotentMcpEndpoint,
  type IdempotentMcpEndpointProps,
  type EndpointSettings,
  type ApprovalPageSettings,
} from '../lib/endpoint';
export { IdempotentMcpGateway, type IdempotentMcpGatewayProps } from '../lib/gateway-construct';
export type { ApprovalSignIn, AuthSettings, ExternalOidcSettings } from '../lib/constructs/auth';
export {
  ServiceFunction,
  type FunctionOptions,
  type PowertoolsSettings,
  type ServiceFunctionProps,
} from '../lib/constructs/service-function';
