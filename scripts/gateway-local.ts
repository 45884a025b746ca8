/**
 * `npm run gateway -- <flags>`: `idempotent-mcp gateway`, with DynamoDB Local started for it (data kept in
 * .local/gateway/) unless DYNAMODB_ENDPOINT names one. Ctrl-C stops both.
 */
import { quietSdkNodeNotice } from '../lambdas/local/sdk-node-notice';

process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
quietSdkNodeNotice();
const { runGatewayMain } = await import('../lambdas/gateway/command');
const { startDynamoDbLocal } = await import('../lambdas/local/dynamodb-local');
const { localDevToken } = await import('../lambdas/local/server');

let onStop: (() => Promise<void>) | undefined;
const argv = process.argv.slice(2);
if (!process.env.DYNAMODB_ENDPOINT && !argv.includes('--help')) {
  const dynamo = await startDynamoDbLocal({ dbPath: '.local/gateway/dynamodb' });
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  onStop = dynamo.stop;
}
await runGatewayMain(argv, process.env, { onStop, devToken: localDevToken });
