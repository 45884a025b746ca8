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
export {
  createApp,
  servedHostnames,
  MCP_PATH,
  MAX_BODY_BYTES,
  PROTECTED_RESOURCE_METADATA_PATH,
  type AppOptions,
  type AppServices,
  type AppEnv,
} from '../lambdas/http/app';
export { createLambdaHandler } from '../lambdas/http/function-url';
export { createServices, type ServiceOverrides, type Services } from '../lambdas/runtime/services';
export { createWorkerServices, type WorkerServiceOverrides, type WorkerServices } from '../lambdas/runtime/worker-services';
export {
  createWorkers,
  type ConsumerOverrides,
  type OutboxQueueClient,
  type ReconcilerOverrides,
  type ReconcilerServices,
  type RelayOverrides,
  type WorkerOverrides,
  type Workers,
} from '../lambdas/runtime/workers';
// The workers' types, as `Workers` holds them (their classes are built by `createWorkers`, never by a team).
export type { OutboxRelay, RelayOptions } from '../lambdas/outbox/relay';
export type { OutboxConsumer, ConsumerOptions, ConsumeOutcome } from '../lambdas/outbox/consumer';
export { createConsumerHandler, createReconcilerHandler, createRelayHandler } from '../lambdas/runtime/worker-events';
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
  type SecretSource,
  type ApprovalPageConfig,
  type SideEffectsConfig,
  type EnvVarKey,
  type EnvValue,
} from '../lambdas/config';
export {
  createTokenVerifier,
  AuthenticationError,
  AuthUnavailableError,
  type Caller,
  type TokenVerifier,
  type TokenVerifierOptions,
} from '../lambdas/auth/verifier';
export { withMetrics, countForTool, MetricName } from '../lambdas/observability/metrics';
export { SecretUnavailableError } from '../lambdas/core/errors';
export { devIssuerFor, loadDevIssuer, DEV_TOKEN_TTL_SECONDS, type DevIssuer } from '../lambdas/auth/dev-issuer';
export { createDevSignIn } from '../lambdas/http/dev-sign-in';
export { DEV_KEY_FILE } from '../lambdas/auth/dev-keys';
export { localOperationIdSecret, OPERATION_ID_SECRET_FILE, readSecretString } from '../lambdas/runtime/operation-id-secret';
