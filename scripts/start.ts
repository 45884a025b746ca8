/**
 * `npm start`: DynamoDB Local (data kept in .local/), the table, and the MCP endpoint on http://127.0.0.1:${PORT:-3000}/mcp.
 * Prints the URL and a bearer token for tenant `demo`; Ctrl-C stops everything it started.
 */
// Set before the observability modules load: locally, metrics would only add EMF noise to the terminal.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const { startLocalStack } = await import('../local/stack');
const { stateOf, writeLocalState } = await import('../ops/local-state');
export {};

const port = Number(process.env.PORT ?? 3000);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`PORT must be a port number (got "${process.env.PORT}")`);
  process.exit(1);
}

let stack: Awaited<ReturnType<typeof startLocalStack>> | undefined;
let token: string;
let removeState = async () => {};
try {
  stack = await startLocalStack({ persistDir: '.local', port });
  token = await stack.tokenFor('demo');
  // `npm run ops` finds this stack's table and queues here, with no flags.
  removeState = await writeLocalState('.local', stateOf(stack));
} catch (err) {
  console.error(`Could not start: ${(err as Error).message}`);
  await stack?.stop();
  process.exit(1);
}

console.log(`
Idempotent MCP endpoint is running (data kept in .local/), with the outbox queue, its relay, consumer and
reconciler, and the sandbox payments provider, ticket system and mailbox.

  MCP URL        ${stack.mcpUrl}
  Tenant         demo
  Bearer token   ${token}

  Sandbox ledger ${stack.url}/sandbox/ledger
  Inject faults  curl -X POST ${stack.url}/sandbox/faults -H 'content-type: application/json' -d '{"target":"payments","mode":"commit-then-timeout"}'
  Another tenant npm run token -- --tenant <id>
  Review         npm run ops -- list      (records and events parked for a person)

  Claude Code    claude mcp add --transport http idempotent-mcp ${stack.mcpUrl} --header "Authorization: Bearer ${token}"

Ctrl-C to stop.`);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`\n${signal}: stopping...`);
  await removeState();
  await stack?.stop();
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
