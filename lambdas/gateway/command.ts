import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { type createDynamoDbClient, DynamoDbRecordMemos } from 'idempotent-mcp/dynamodb';
import { ConfigError, EnvVars, read, type Env } from 'idempotent-mcp/lambda';
import { startLocalServer } from 'idempotent-mcp/local';
import { GatewayEnvVars, upstreamKeyPrefix } from './config';
import { CredentialsError, envCredentials, fileCredentials, staticCredentials, type CredentialSource } from './credentials';
import { checkPolicyFile, createGateway, type Gateway } from './create-gateway';
import { GatewayPolicyError } from './policy';
import { UpstreamError, type UpstreamTarget } from './upstream';

const GATEWAY_USAGE = `Usage: idempotent-mcp gateway --policy <file> [options] (--upstream-url <url> | -- <command> [args...])

  --policy <file>        the policy per upstream tool (JSON; docs/gateway.md)       [GATEWAY_POLICY_FILE]
  --upstream-url <url>   a streamable-HTTP MCP server                                [GATEWAY_UPSTREAM_URL]
  -- <command> [args]    or a stdio MCP server the gateway starts (locally)
  --credentials <file>   the gateway's own upstream credentials, by tenant (JSON)    [GATEWAY_CREDENTIALS_FILE]
                         (or GATEWAY_CREDENTIALS with the JSON itself; none given: the upstream is called without one)
  --port <n>             default 3100; 0 picks a free port
  --state-dir <dir>      local state: the dev issuer's key, the operation-id secret (default .gateway)
  --token <tenant>       print a token of the local dev issuer for this tenant and exit (the gateway running with
                         the same --state-dir accepts it): a second tenant, for a local try

Table, auth and reconciler settings are the endpoint's (docs/configuration.md): TABLE_NAME (default
idempotent-mcp-gateway), TABLE_KEY_PREFIX (default the upstream's: gw.<digest of the URL or command>:),
DYNAMODB_ENDPOINT (DynamoDB Local; the table is created there), AUTH_MODE (default dev
here: tokens from the local issuer, one printed at start), RECONCILE_INTERVAL_MS.`;

/** The table's document client (the one `createDynamoDbClient` makes). */
type TableClient = ReturnType<typeof createDynamoDbClient>;

class GatewayUsageError extends Error {
  override name = 'GatewayUsageError';
}

/** The upstream could not be had at start: the message is the sentence a person reads. */
class UpstreamStartError extends Error {
  override name = 'UpstreamStartError';
}

export interface GatewayCommand {
  policyFile: string;
  upstream: UpstreamTarget;
  credentials: () => Promise<CredentialSource>;
  /** No credentials given: the upstream is called without one, so it sees one caller for every tenant. */
  sharedIdentity: boolean;
  port: number;
  stateDir: string;
}

/** The command line and the environment, checked: one sentence per mistake. */
export function parseGatewayCommand(argv: readonly string[], env: Env): GatewayCommand {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        policy: { type: 'string' },
        'upstream-url': { type: 'string' },
        credentials: { type: 'string' },
        port: { type: 'string' },
        'state-dir': { type: 'string' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new GatewayUsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  const policyFile = values.policy ?? read(env, GatewayEnvVars.policyFile);
  if (!policyFile) throw new GatewayUsageError('--policy <file> is required: the policy per upstream tool');
  const url = values['upstream-url'] ?? read(env, GatewayEnvVars.upstreamUrl);
  if (url && positionals.length > 0) throw new GatewayUsageError('give --upstream-url or a command after --, not both');
  let upstream: UpstreamTarget;
  if (url) {
    if (!/^https?:\/\/\S+$/.test(url)) throw new GatewayUsageError(`--upstream-url must be an http(s) URL (got ${url.slice(0, 80)})`);
    upstream = { url };
  } else if (positionals.length > 0) upstream = { command: positionals[0]!, args: positionals.slice(1) };
  else throw new GatewayUsageError('name the upstream: --upstream-url <url>, or -- <command> [args] for a stdio server');
  const port = Number(values.port ?? 3100);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new GatewayUsageError(`--port must be a port number (got ${values.port})`);
  const credentialsFile = values.credentials ?? read(env, GatewayEnvVars.credentialsFile);
  const credentialsJson = read(env, GatewayEnvVars.credentialsJson);
  const credentials = async () =>
    credentialsFile
      ? fileCredentials(credentialsFile)
      : credentialsJson
        ? envCredentials(GatewayEnvVars.credentialsJson.name, credentialsJson)
        : staticCredentials({ tenants: { '*': { none: true } } });
  return {
    policyFile,
    upstream,
    credentials,
    sharedIdentity: !credentialsFile && !credentialsJson,
    port,
    stateDir: resolve(values['state-dir'] ?? '.gateway'),
  };
}

async function readJson(path: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new GatewayUsageError(`the ${what} ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new GatewayUsageError(`the ${what} ${path} is not JSON: ${(err as Error).message}`);
  }
}

const firstLine = (text: string) => text.split('\n')[0]!.slice(0, 300);

const NETWORK_FAILURES: ReadonlyMap<string, string> = new Map([
  ['ECONNREFUSED', 'connection refused'],
  ['ECONNRESET', 'connection reset'],
  ['ENOTFOUND', 'no such host'],
  ['EAI_AGAIN', 'its host name could not be looked up'],
  ['EHOSTUNREACH', 'no route to it'],
  ['ENETUNREACH', 'no route to it'],
  ['ETIMEDOUT', 'the connection timed out'],
  ['UND_ERR_CONNECT_TIMEOUT', 'the connection timed out'],
]);

/**
 * Why the upstream could not be had at start, as one sentence naming it (its URL or command) and what to do: never
 * the error's class or a stack, which tell a person running the command nothing.
 */
function upstreamStartSentence(upstream: UpstreamTarget, err: unknown): string {
  const http = 'url' in upstream;
  const what = http
    ? `the upstream ${upstream.url}`
    : `the upstream command ${[upstream.command, ...(upstream.args ?? [])].join(' ').slice(0, 200)}`;
  if (err instanceof UpstreamError && err.failure === 'credential_refused')
    return `${what}: ${err.message}; check the gateway's credentials (--credentials)`;
  // The innermost cause says what happened (a refused connection, a missing program); the wrappers say where.
  const causes: Array<Error & { code?: unknown }> = [];
  for (let cause = err, depth = 0; cause instanceof Error && depth < 6; cause = cause.cause, depth++) causes.push(cause);
  const codes = causes.map((cause) => String(cause.code));
  const sdk = causes.find((cause): cause is SdkError => cause instanceof SdkError);
  if (http) {
    const network = codes.map((code) => NETWORK_FAILURES.get(code)).find(Boolean);
    if (network) return `${what} cannot be reached (${network}): start it, or give --upstream-url the address it listens on`;
    if (sdk instanceof SdkHttpError)
      return `${what} answered HTTP ${sdk.status}: give --upstream-url the MCP server's streamable-HTTP address (often ending in /mcp)`;
  } else {
    if (codes.includes('ENOENT'))
      return `${what} cannot be started: there is no such program; give the path of an MCP server's program after -- (or npx <package> for one from npm)`;
    if (codes.includes('EACCES'))
      return `${what} cannot be started: the program may not be run (permission denied); give an executable MCP server after --`;
  }
  if (sdk?.code === SdkErrorCode.ConnectionClosed)
    return http
      ? `${what} closed the connection before it answered: check that it is an MCP server speaking streamable HTTP`
      : `${what} closed before it answered: run it on its own to see why (the gateway needs an MCP server speaking stdio)`;
  if (sdk?.code === SdkErrorCode.RequestTimeout) return `${what} did not answer in time: check that it is running and is an MCP server`;
  const innermost = causes.at(-1);
  return `${what} did not answer as an MCP server (${firstLine(innermost?.message ?? String(err))}): check that it speaks MCP over ${http ? 'streamable HTTP' : 'stdio'}`;
}

export interface RunningGateway {
  url: string;
  mcpUrl: string;
  gateway: Gateway;
  /** Whose records are this gateway's on the table (TABLE_KEY_PREFIX): by default its upstream's. */
  keyPrefix?: string;
  /** The table's client (the bench counts the requests a call sends through it). */
  doc: TableClient;
  /** A token of the local dev issuer (AUTH_MODE=dev only). */
  tokenFor(tenant: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * The gateway as a local process: the endpoint's HTTP app (auth, tenants, result contract, approval page) serving
 * the gateway's tools on 127.0.0.1, and the reconciler running in the same process.
 */
export async function startGatewayCommand(command: GatewayCommand, givenEnv: Env): Promise<RunningGateway> {
  // The records are the upstream's own: another gateway (another upstream) on the same table never settles them.
  const env: Env = {
    TABLE_NAME: 'idempotent-mcp-gateway',
    [EnvVars.tableKeyPrefix.name]: upstreamKeyPrefix(command.upstream),
    ...givenEnv,
  };
  // The file's own mistakes first: a store's sentence (none set, say) would hide them until it is fixed.
  const policy = await readJson(command.policyFile, 'policy file');
  const { mistakes } = checkPolicyFile(policy, command.upstream);
  if (mistakes.length > 0) throw new GatewayPolicyError(mistakes);
  const credentials = await command.credentials();
  let gateway: Gateway | undefined;
  let table: { doc: TableClient; keyPrefix?: string } | undefined;
  // The store is the environment's (DYNAMODB_ENDPOINT, else the region's table), checked before serving; no outbox.
  const server = await startLocalServer({
    env,
    stateDir: command.stateDir,
    port: command.port,
    dynamoDbLocal: false,
    outbox: false,
    async serve(services, config) {
      table = { doc: services.doc, ...(config.tableKeyPrefix ? { keyPrefix: config.tableKeyPrefix } : {}) };
      gateway = await createGateway({
        policy,
        upstream: command.upstream,
        credentials,
        table: { memos: new DynamoDbRecordMemos({ doc: services.doc, tableName: config.tableName, keyPrefix: config.tableKeyPrefix }) },
      }).catch((err: unknown) => {
        throw err instanceof GatewayPolicyError || err instanceof CredentialsError
          ? err
          : new UpstreamStartError(upstreamStartSentence(command.upstream, err), { cause: err });
      });
      if (gateway.hidden.length > 0)
        services.logger.warn('upstream tools the policy does not name are not served', { hidden: gateway.hidden });
      const started = gateway;
      return { tools: started.tools, close: () => started.close() };
    },
  });
  return {
    url: server.url,
    mcpUrl: server.mcpUrl,
    gateway: gateway!,
    doc: table!.doc,
    ...(table!.keyPrefix ? { keyPrefix: table!.keyPrefix } : {}),
    tokenFor: (tenant) => server.tokenFor(tenant),
    stop: server.stop,
  };
}

/**
 * The bin's whole life: parse, start, print the banner (URL, tools, a dev token), stop on SIGINT/SIGTERM. Mistakes
 * in the flags, the policy or the credentials stop it before it serves, one sentence each, exit code 2. `devToken`
 * makes `--token`'s token: the local dev issuer's for the state folder and the settings, as a local server of the
 * toolkit's makes them (the bin gives it; without it `--token` is refused).
 */
export async function runGatewayMain(
  argv: readonly string[],
  env: Env,
  options: {
    onStop?: () => Promise<void>;
    devToken?: (tenant: string, local: { stateDir: string; env: Env }) => Promise<string>;
  } = {},
): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(GATEWAY_USAGE);
    return;
  }
  const tokenAt = argv.indexOf('--token');
  if (tokenAt >= 0) {
    const tenant = argv[tokenAt + 1];
    const stateAt = argv.indexOf('--state-dir');
    try {
      if (!tenant || tenant.startsWith('-')) throw new GatewayUsageError('--token needs a tenant: --token <tenant>');
      if ((env.AUTH_MODE ?? 'dev') !== 'dev') throw new ConfigError('--token makes tokens of the local dev issuer only (AUTH_MODE=dev)');
      const stateDir = resolve((stateAt >= 0 ? argv[stateAt + 1] : undefined) ?? '.gateway');
      if (!options.devToken) throw new GatewayUsageError('--token is not available here: run idempotent-mcp gateway --token <tenant>');
      console.log(await options.devToken(tenant, { stateDir, env: { TABLE_NAME: 'idempotent-mcp-gateway', ...env } }));
      return;
    } catch (err) {
      const known = err instanceof GatewayUsageError || err instanceof ConfigError;
      console.error(`No token: ${known ? (err as Error).message : firstLine(String((err as Error)?.message ?? err))}`);
      process.exit(2);
    }
  }
  let running: RunningGateway;
  let command: GatewayCommand | undefined;
  try {
    command = parseGatewayCommand(argv, env);
    running = await startGatewayCommand(command, env);
  } catch (err) {
    const known =
      err instanceof GatewayUsageError ||
      err instanceof GatewayPolicyError ||
      err instanceof CredentialsError ||
      err instanceof ConfigError ||
      err instanceof UpstreamStartError;
    // One sentence, never a stack trace nor an error's class name: what stopped it, and (for the flags) the usage.
    console.error(`The gateway did not start: ${known ? (err as Error).message : firstLine((err as Error)?.message ?? String(err))}`);
    if (err instanceof GatewayUsageError) console.error(`\n${GATEWAY_USAGE}`);
    await options.onStop?.();
    process.exit(2);
  }
  const { gateway } = running;
  const names = (kind: 'write' | 'read') =>
    gateway.tools
      .filter((tool) => tool.kind === kind)
      .map((tool) => tool.name)
      .join(', ') || 'none';
  const token = (env.AUTH_MODE ?? 'dev') === 'dev' ? await running.tokenFor('demo') : undefined;
  console.log(
    [
      'Idempotent MCP gateway is running.',
      '',
      `  MCP URL        ${running.mcpUrl}`,
      `  Writes         ${names('write')}`,
      `  Reads          ${names('read')}`,
      `  Not served     ${gateway.hidden.join(', ') || 'none'} (not in the policy)`,
      `  Records        ${running.keyPrefix ?? 'no key prefix'} (TABLE_KEY_PREFIX; idempotent-mcp ops --key-prefix)`,
      ...(token ? ['  Tenant         demo', `  Bearer token   ${token}`] : []),
      ...(command?.sharedIdentity
        ? ['', '  No --credentials: the upstream sees one caller for every tenant (what one tenant can read or change there, all can).']
        : []),
      '',
      'Ctrl-C to stop.',
    ].join('\n'),
  );
  let stopping = false;
  const shutdown = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${reason}: stopping...`);
    await running.stop();
    await options.onStop?.();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}
