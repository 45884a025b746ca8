import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DEV_KEY_FILE } from '../auth/dev-keys';
import { stateOf, writeLocalState } from '../ops/local-state';
import { confirmationNotice } from './confirmation-notice';
import { quietSdkNodeNotice } from './sdk-node-notice';
import { startInternalLocalServer, type InternalLocalServer, type LocalServer, type LocalServerOptions } from './server';
import { watchStateDir } from './state-dir';

/**
 * A local endpoint in the foreground, the one code path of `npm start` and `idempotent-mcp dev`: DynamoDB Local
 * (data kept in the state folder), the table, the MCP endpoint with sign-in and the approval page, the outbox relay
 * and consumer, the reconciler; the state the review tool reads; a banner with the URL, a bearer token and the
 * commands. Ctrl-C (or the state folder deleted under it) stops everything it started.
 * @public
 */
export async function runLocalEndpoint(options: {
  /**
   * What it serves (`startLocalServer`'s options; the state folder and the port are this endpoint's): a team's
   * tools module (`idempotent-mcp dev`), or the reference endpoint's tools and sandbox (`npm start`).
   */
  server: Omit<LocalServerOptions, 'stateDir' | 'port'>;
  /** State folder: DynamoDB data, the token signing key, the operation-id secret (`.local`). */
  stateDir: string;
  /** The port it listens on; 0 picks a free one. Default: PORT from the environment, else 3000 (a PORT that is no port number exits with one sentence). */
  port?: number;
  /** The tenant of the printed token. */
  tenant: string;
  /** How a person runs this start, another tenant's token, and the review tool, as they type them. */
  commands: { start: string; token: string; ops: string };
  /** What it serves, for the banner's first line ("the reference tools", "your tools from tools.ts"). */
  serving: string;
  /** Lines the banner shows above the MCP URL (the reference's sandbox). */
  banner?: (server: LocalServer) => string[];
}): Promise<void> {
  const { stateDir, commands } = options;
  const port = options.port ?? localPort(process.env.PORT, 'PORT');
  // The AWS SDK's notice that it will need Node 22 from January 2027 would open every start; README says which Node to use.
  quietSdkNodeNotice();
  let stack: InternalLocalServer | undefined;
  let token: string;
  let removeState = async () => {};
  let newKeyNotice = '';
  let authDir = '';
  try {
    // Where the server will look for its signing key (DEV_AUTH_DIR, else <state>/auth), read before it makes one.
    const keyFile = join(process.env.DEV_AUTH_DIR || join(stateDir, 'auth'), DEV_KEY_FILE);
    const hadKey = existsSync(keyFile);
    const given = options.server.env;
    stack = await startInternalLocalServer({
      ...options.server,
      // Tokens of the local dev issuer: the banner prints one.
      env: (url) => ({ ...(typeof given === 'function' ? given(url) : (given ?? process.env)), AUTH_MODE: 'dev' }),
      stateDir,
      port,
    });
    if (stack.config.auth.mode !== 'dev') throw new Error(`${commands.start} signs tokens with the local dev issuer`);
    authDir = stack.config.auth.devAuthDir;
    token = await stack.tokenFor(options.tenant);
    // A key made by this start (the first token makes it: a fresh folder, or the folder or key deleted): tokens of
    // any earlier start no longer verify. Nothing tells a first start from one after the folder was deleted, so both say it.
    if (!hadKey && existsSync(join(authDir, DEV_KEY_FILE)))
      newKeyNotice = `\n  Note           A new signing key was made in ${authDir}: tokens printed by an earlier start are refused.\n`;
    // The review tool finds this endpoint's table and queues here, with no flags.
    if (stack.queue) removeState = await writeLocalState(stateDir, stateOf({ config: stack.config, queue: stack.queue }));
  } catch (err) {
    const inUse = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
    console.error(
      inUse
        ? `Could not start: port ${port} is in use (another ${commands.start}?). Stop it, or pick another port: PORT=${port + 1} ${commands.start}`
        : `Could not start: ${(err as Error).message}`,
    );
    await stack?.stop();
    process.exit(1);
  }

  const extra = options.banner?.(stack) ?? [];
  const sandbox = extra.length > 0 ? ['', ...extra] : [];
  const outbox =
    stack.config.sideEffects.outboxEnabled !== false
      ? ', with the outbox queue, its relay and consumer, and the reconciler'
      : ' and the reconciler (no outbox: no deliveries module)';
  console.log(`
Idempotent MCP endpoint is running with ${options.serving} (data kept in ${stateDir}/)${outbox}.
${sandbox.join('\n')}
  MCP URL        ${stack.mcpUrl}
  Tenant         ${options.tenant}
  Bearer token   ${token}

  Another tenant ${commands.token}
  Review         ${commands.ops}      (records and events parked for a person)
${confirmationNotice(stack.tools, stack.config, stack.url).join('\n')}

  Claude Code    claude mcp add --transport http idempotent-mcp ${stack.mcpUrl} --header "Authorization: Bearer ${token}"
${newKeyNotice}
  ${stateDir}/ holds the data, the token signing key and the operation-id secret: delete it only while stopped.
  Logs below are JSON; POWERTOOLS_LOG_LEVEL=WARN ${commands.start} shows only warnings and errors.

Ctrl-C to stop.`);

  let stopping = false;
  async function shutdown(reason: string, exitCode = 0) {
    if (stopping) return;
    stopping = true;
    console.log(`\n${reason}: stopping...`);
    await removeState();
    await stack?.stop();
    process.exit(exitCode);
  }
  // Deleting the state folder under a running server breaks every write and, at the next start, every token: say so and stop.
  // The emulator's data is watched only where this start put it: with DYNAMODB_ENDPOINT it lives elsewhere.
  watchStateDir(stateDir, { authDir, dataDir: stack.dynamoDbDataDir }, (explanation) => {
    console.error(`\n${explanation}`);
    void shutdown('state folder deleted', 1);
  });
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}

/** The default port of a local endpoint (`npm start`, `idempotent-mcp dev`); the gateway's is 3100. */
const LOCAL_ENDPOINT_PORT = 3000;

/**
 * A port given as text (PORT, `--port`), or the default (3000); anything else exits with one sentence naming `what`.
 */
export function localPort(value: string | undefined, what: string): number {
  const port = Number(value ?? LOCAL_ENDPOINT_PORT);
  if (value?.trim() === '' || !Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`${what} must be a port number from 0 to 65535 (got "${value}")`);
    process.exit(2);
  }
  return port;
}
