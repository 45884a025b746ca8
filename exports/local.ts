/**
 * `idempotent-mcp/local`: an endpoint on this machine, as `idempotent-mcp dev`, `idempotent-mcp gateway` and this
 * repository's `npm start` run one: DynamoDB Local and a local queue (needs the optional peers
 * `amplify-dynamodb-simulator` and `fauxqs`, unless DYNAMODB_ENDPOINT and SQS_ENDPOINT name running ones), the
 * settings and services as the Lambda builds them, the HTTP app with the dev issuer's sign-in, the workers.
 */
export { startLocalServer, type LocalServer, type LocalServerOptions } from '../lambdas/local/server';
export { runLocalEndpoint } from '../lambdas/local/dev';
