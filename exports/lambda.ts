/**
 * `idempotent-mcp/lambda`: the Lambda wiring of an endpoint (what the constructs bundle around a tools module):
 * the handler factories, the services built once per container, the workers, the endpoint's environment
 * variables, the HTTP app. A team serving its tools with `IdempotentMcpEndpoint` needs none of it; an endpoint with a
 * layout of its own (like this repository's reference endpoint) builds on it.
 */
export { mcpLambdaHandler } from '../lambdas/functions/endpoint';
export { reconcilerLambdaHandler } from '../lambdas/functions/reconciler-endpoint';
// The handlers' checks of a tools or deliveries module, which the constructs also run at synth (lib/tools-check.ts).
export { consumerLambdaHandler, deliveriesOf, type DeliveriesModule } from '../lambdas/functions/consumer-endpoint';
export { clientsOf, toolsOf, type ToolsModuleExports } from '../lambdas/functions/tools-exports';
export { createApp, servedHostnames, type AppEnv, type AppOptions, type AppServices } from '../lambdas/http/app';
export { createServices, type ServiceOverrides, type Services } from '../lambdas/runtime/services';
export type { WorkerServiceOverrides, WorkerServices } from '../lambdas/runtime/worker-services';
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
export { createConsumerHandler, createReconcilerHandler } from '../lambdas/runtime/worker-events';
export { readSecretString } from '../lambdas/runtime/operation-id-secret';
export {
  ConfigError,
  loadConfig,
  EnvVars,
  environmentOf,
  read,
  type AppConfig,
  type ApprovalPageConfig,
  type AuthConfig,
  type SecretSource,
  type SideEffectsConfig,
  type WorkerConfig,
  type EnvValue,
  type EnvVarKey,
  type Env,
  type EnvVar,
  type EnvSettings,
} from '../lambdas/config';
export type { TokenVerifier } from '../lambdas/auth/verifier';
export type { OutboxRelay, RelayOptions } from '../lambdas/outbox/relay';
export type { ConsumeOutcome, ConsumerOptions, OutboxConsumer } from '../lambdas/outbox/consumer';
export type { DeliveryClaim, DeliveryMarker, MarkerState, OutboxStore, StoredOutboxEvent } from '../lambdas/outbox/outbox-store';
export type { DeliveryStatus } from '../lambdas/outbox/outbox-event';
export { countForTool, MetricName } from '../lambdas/observability/metrics';
