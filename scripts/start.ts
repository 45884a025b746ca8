/**
 * `npm start`: the reference endpoint's tools on a local endpoint (`runLocalEndpoint`, the code path of
 * `idempotent-mcp dev`), with the sandbox downstreams: DynamoDB Local (data kept in .local/), the table, and the MCP
 * endpoint on http://127.0.0.1:${PORT:-3000}/mcp. Prints the URL and a bearer token for tenant `demo`; Ctrl-C stops
 * everything it started.
 */
// Set before the observability modules load: locally, metrics would only add EMF noise to the terminal.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const { runLocalEndpoint } = await import('idempotent-mcp/local');
const { referenceServer, sandboxBanner } = await import('../reference/local/stack');

const reference = referenceServer();
await runLocalEndpoint({
  server: reference.server,
  banner: (server) => sandboxBanner(server, reference.referenceConfig()),
  stateDir: '.local',
  tenant: 'demo',
  serving: 'the reference tools and the sandbox payments provider, ticket system and mailbox',
  commands: { start: 'npm start', token: 'npm run token -- --tenant <id>', ops: 'npm run ops -- list' },
});

// A module (its top-level awaits), with nothing to export.
export {};
