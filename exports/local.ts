/**
 * `idempotent-mcp/local`: an endpoint on this machine, as `idempotent-mcp dev`, `idempotent-mcp gateway` and this
 * repository's `npm start` run one: DynamoDB Local and a local queue (needs the optional peers
 * `amplify-dynamodb-simulator` and `fauxqs`, unless DYNAMODB_ENDPOINT and SQS_ENDPOINT name running ones), the
 * settings and services as the Lambda builds them, the HTTP app with the dev issuer's sign-in, the workers.
 */
export { startLocalServer, type LocalServer, type LocalServerOptions } from '../lambdas/local/server';
export { runLocalEndpoint, localPort, type LocalEndpointOptions } from '../lambdas/local/dev';
export type { LocalWorkerOptions } from '../lambdas/local/workers';
// A local endpoint's development issuer and operation-id secret (the gateway's local command builds its own endpoint).
export { devIssuerFor, type DevIssuer } from '../lambdas/auth/dev-issuer';
export { localOperationIdSecret } from '../lambdas/runtime/operation-id-secret';
