/**
 * `npm start`: the reference endpoint's tools on a local endpoint (lambdas/local/dev.ts, the code path of `idempotent-mcp dev`),
 * with the sandbox downstreams: DynamoDB Local (data kept in .local/), the table, and the MCP endpoint on
 * http://127.0.0.1:${PORT:-3000}/mcp. Prints the URL and a bearer token for tenant `demo`; Ctrl-C stops everything it started.
 */
import { quietSdkNodeNotice } from '../lambdas/local/sdk-node-notice';

// Set before the observability modules load: locally, metrics would only add EMF noise to the terminal.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
// The AWS SDK's notice that it will need Node 22 from January 2027 would open every start; README says which Node to use.
quietSdkNodeNotice();
const { localPort, runLocalEndpoint } = await import('../lambdas/local/dev');
const { tools } = await import('../reference/tools');

await runLocalEndpoint({
  tools,
  sandbox: true,
  stateDir: '.local',
  port: localPort(process.env.PORT, 'PORT'),
  tenant: 'demo',
  serving: 'the reference tools and the sandbox payments provider, ticket system and mailbox',
  commands: { start: 'npm start', token: 'npm run token -- --tenant <id>', ops: 'npm run ops -- list' },
});
