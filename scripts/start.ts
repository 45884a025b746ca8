/**
 * `npm start`: DynamoDB Local (data kept in .local/), the table, and the MCP endpoint on http://127.0.0.1:${PORT:-3000}/mcp.
 * Prints the URL and a bearer token for tenant `demo`; Ctrl-C stops everything it started.
 */
// Set before the observability modules load: locally, metrics would only add EMF noise to the terminal.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
// The AWS SDK's notice that it will need Node 22 from January 2027 would open every start; README says which Node to use.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { startLocalStack } = await import('../local/stack');
const { stateOf, writeLocalState } = await import('../ops/local-state');
const { watchStateDir } = await import('../local/state-dir');
const { DEV_KEY_FILE } = await import('idempotent-mcp/lambda');
const { confirmationNotice } = await import('../local/confirmation-notice');
const { tools: referenceTools } = await import('../reference/tools');
const { existsSync } = await import('node:fs');
const { join } = await import('node:path');
export {};

const port = Number(process.env.PORT ?? 3000);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`PORT must be a port number (got "${process.env.PORT}")`);
  process.exit(1);
}

let stack: Awaited<ReturnType<typeof startLocalStack>> | undefined;
let token: string;
let removeState = async () => {};
const STATE_DIR = '.local';
let newKeyNotice = '';
let authDir = '';
try {
  // Where the stack will look for its signing key (DEV_AUTH_DIR, else .local/auth), read before it makes one.
  const keyFile = join(process.env.DEV_AUTH_DIR || join(STATE_DIR, 'auth'), DEV_KEY_FILE);
  const hadKey = existsSync(keyFile);
  stack = await startLocalStack({ persistDir: STATE_DIR, port });
  if (stack.config.auth.mode !== 'dev') throw new Error('npm start signs tokens with the local dev issuer');
  authDir = stack.config.auth.devAuthDir;
  token = await stack.tokenFor('demo');
  // A key made by this start (the first token makes it: a fresh clone, or the folder or key deleted): tokens of any
  // earlier start no longer verify. Nothing tells a first start from one after `.local/` was deleted, so both say it.
  if (!hadKey && existsSync(join(authDir, DEV_KEY_FILE)))
    newKeyNotice = `\n  Note           A new signing key was made in ${authDir}: tokens printed by an earlier start are refused.\n`;
  // `npm run ops` finds this stack's table and queues here, with no flags.
  removeState = await writeLocalState(STATE_DIR, stateOf(stack));
} catch (err) {
  const inUse = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
  console.error(
    inUse
      ? `Could not start: port ${port} is in use (another npm start?). Stop it, or pick another port: PORT=${port + 1} npm start`
      : `Could not start: ${(err as Error).message}`,
  );
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
${confirmationNotice(referenceTools, stack.config, stack.url).join('\n')}

  Claude Code    claude mcp add --transport http idempotent-mcp ${stack.mcpUrl} --header "Authorization: Bearer ${token}"
${newKeyNotice}
  ${STATE_DIR}/ holds the data, the token signing key and the operation-id secret: delete it only while stopped.
  Logs below are JSON; POWERTOOLS_LOG_LEVEL=WARN npm start shows only warnings and errors.

Ctrl-C to stop.`);

// Deleting the state folder under a running server breaks every write and, at the next start, every token: say so and stop.
// The emulator's data is watched only where this start put it: with DYNAMODB_ENDPOINT it lives elsewhere.
watchStateDir(STATE_DIR, { authDir, dataDir: stack.dynamoDbDataDir }, (explanation) => {
  console.error(`\n${explanation}`);
  void shutdown('state folder deleted', 1);
});

let stopping = false;
async function shutdown(reason: string, exitCode = 0) {
  if (stopping) return;
  stopping = true;
  console.log(`\n${reason}: stopping...`);
  await removeState();
  await stack?.stop();
  process.exit(exitCode);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
