/**
 * `idempotent-mcp/lambda`: the Lambda wiring of an endpoint (what the constructs bundle around a tools module):
 * the handler factories, the services built once per container, the workers, the typed environment and its
 * loader, the HTTP app. A team serving its tools with `IdempotentMcpEndpoint` needs none of it; an endpoint with a
 * layout of its own (like this repository's reference endpoint) builds on it.
 */
export { mcpLambdaHandler } from '../lambdas/functions/endpoint';
export { reconcilerLambdaHandler } from '../lambdas/functions/reconciler-endpoint';
export { consumerLambdaHandler, deliveriesOf, type DeliveriesModule } from '../lambdas/functions/consumer-endpoint';
export { clientsOf, toolsOf, type ToolsModuleExports } from '../lambdas/functions/tools-exports';
export { createApp, servedHostnames, MCP_PATH, MAX_BODY_BYTES, PROTECTED_RESOURCE_METADATA_PATH, type AppOptions, type AppServices } from '../lambdas/http/app';
export { createLambdaHandler } from '../lambdas/http/function-url';
export { createServices, type ServiceOverrides, type Services } from '../lambdas/runtime/services';
export { createWorkerServices, type WorkerServiceOverrides, type WorkerServices } from '../lambdas/runtime/worker-services';
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
} from '../lambdas/runtime/workers';
export { createConsumerSqsHandler, createReconcilerHandler, createRelayStreamHandler } from '../lambdas/runtime/worker-events';
export {
  loadConfig,
  loadWorkerConfig,
  loadAuthConfig,
  ConfigError,
  DEV_SIGN_IN_MOUNT,
  EnvVars,
  environmentOf,
  environmentFor,
  read,
  text,
  httpUrl,
  positiveInt,
  oneOf,
  flag,
  commaList,
  type AppConfig,
  type WorkerConfig,
  type AuthConfig,
  type Env,
  type EnvVar,
  type EnvSettings,
  type SettingsOf,
} from '../lambdas/config';
export { createTokenVerifier, AuthenticationError, AuthUnavailableError, type Caller, type TokenVerifier } from '../lambdas/auth/verifier';
export { withMetrics, countForTool, MetricName } from '../lambdas/observability/metrics';
export { SecretUnavailableError } from '../lambdas/core/errors';
export { devIssuerFor, loadDevIssuer, DEV_TOKEN_TTL_SECONDS, type DevIssuer } from '../lambdas/auth/dev-issuer';
export { createDevSignIn } from '../lambdas/http/dev-sign-in';
export { DEV_KEY_FILE } from '../lambdas/auth/dev-keys';
