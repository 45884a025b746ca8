/**
 * `idempotent-mcp/lambda`: the Lambda wiring of an endpoint (what the constructs bundle around a tools module): the
 * three functions' handlers, built from a tools (or deliveries) module and the environment; the endpoint's
 * environment variables, one typed declaration each, read by the functions and written by the constructs; the
 * Secrets Manager read the functions use; the metric names the alarms and dashboard watch. A team serving its tools
 * with `IdempotentMcpEndpoint` needs none of it; an endpoint with a layout of its own (like this repository's
 * reference endpoint) builds on it.
 */
export { mcpLambdaHandler } from '../lambdas/functions/endpoint';
export { reconcilerLambdaHandler } from '../lambdas/functions/reconciler-endpoint';
export { consumerLambdaHandler } from '../lambdas/functions/consumer-endpoint';
export { readSecretString } from '../lambdas/runtime/operation-id-secret';
export { ConfigError, read, type Env, type EnvVar } from '../lambdas/env-var';
export { EnvVars, environmentOf } from '../lambdas/config';
export { countForTool, MetricName } from '../lambdas/observability/metrics';
