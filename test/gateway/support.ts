import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { PACKAGE_ROOT } from '../../lib/package-root';
import { createTestTable } from '../support/dynamodb';
import type { CredentialSource, CredentialsFile } from '../../lambdas/gateway/credentials';
import { parseGatewayCommand, startGatewayCommand, type RunningGateway } from '../../lambdas/gateway/command';
import { REGISTRY_SERVERS, startEverything } from './registry-servers';

export const ROOT = PACKAGE_ROOT;
export const BIN = join(ROOT, 'node_modules', '.bin');
export const RELAY = join(ROOT, 'test', 'gateway', 'relay.mjs');
/** A team's own billing server (MCP SDK 1.x, sessions kept in memory; no deduplication): test/gateway/session-server.mjs. */
export const BILLING_SERVER = join(ROOT, 'test', 'gateway', 'session-server.mjs');

/** A JSON-lines file's lines (the billing server's ledger and log); none before it is written. */
export function jsonLines(file: string): Array<Record<string, unknown>> {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The billing server over streamable HTTP on 127.0.0.1:`port`, its charges in `files.ledger`; resolves once it listens. */
export function startBillingServer(port: number, files: { ledger: string; log?: string }): Promise<ChildProcess> {
  const flags = [`--port=${port}`, `--ledger=${files.ledger}`, ...(files.log ? [`--log=${files.log}`] : [])];
  const child = spawn(process.execPath, [BILLING_SERVER, ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let text = '';
    child.stderr!.on('data', (chunk) => {
      text += chunk;
      if (text.includes('listening')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`the billing server exited (${code}): ${text}`)));
  });
}

/** A temporary folder, removed by `cleanup`. */
export async function scratch(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `gateway-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The relay's log: every `tools/call` it forwarded to the registry server. */
export interface RelayedCall {
  name: string;
  arguments: Record<string, unknown>;
  at: number;
}

export function relayedCalls(logFile: string): RelayedCall[] {
  if (!existsSync(logFile)) return [];
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RelayedCall);
}

export type Fault = { tool: string; match?: string; action: 'drop-answer' | 'delay' | 'kill'; ms?: number; times?: number };
export const setFaults = (file: string, faults: Fault[]) => writeFile(file, JSON.stringify(faults));

/** The gateway's upstream command: the relay, wrapping a registry server's bin. */
export function relayed(files: { log: string; faults: string }, server: keyof typeof REGISTRY_SERVERS, ...args: string[]): string[] {
  return [
    '--',
    process.execPath,
    RELAY,
    `--log=${files.log}`,
    `--faults=${files.faults}`,
    '--',
    process.execPath,
    REGISTRY_SERVERS[server],
    ...args,
  ];
}

export interface TestGateway extends RunningGateway {
  table: Awaited<ReturnType<typeof createTestTable>>;
  stateDir: string;
}

/** The gateway in this process (the same code its bin runs), on a fresh table of the shared DynamoDB Local. */
export async function startTestGateway(options: {
  policy: unknown;
  argv: string[];
  env?: Record<string, string>;
  credentials?: CredentialSource;
  /** A table another gateway uses too (left in place at stop); default a fresh one. */
  table?: TestGateway['table'];
}): Promise<TestGateway> {
  const table = options.table ?? (await createTestTable());
  const { dir: stateDir } = await scratch('state');
  const policyFile = join(stateDir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(options.policy));
  const env = {
    ...process.env,
    DYNAMODB_ENDPOINT: table.endpoint,
    TABLE_NAME: table.tableName,
    AUTH_MODE: 'dev',
    RECONCILE_INTERVAL_MS: '200',
    ...options.env,
  };
  const parsed = parseGatewayCommand(['--policy', policyFile, '--port', '0', '--state-dir', stateDir, ...options.argv], env);
  // A credential source of the test's own (Secrets Manager's, as deployed) in place of the command's file or variable.
  const source = options.credentials;
  const command = source ? { ...parsed, credentials: async () => source } : parsed;
  const running = await startGatewayCommand(command, env);
  return {
    ...running,
    table,
    stateDir,
    stop: async () => {
      await running.stop();
      if (!options.table) await table.drop();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/** A plain v2 SDK client of the gateway, as tenant. */
export async function sdkClient(gateway: Pick<RunningGateway, 'mcpUrl' | 'tokenFor'>, tenant = 'demo'): Promise<Client> {
  const token = await gateway.tokenFor(tenant);
  const client = new Client({ name: 'gateway-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(gateway.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

export const newKey = () => `key-${randomUUID()}`;

/** The structured result of a write (the toolkit's result contract). */
export function contract(answer: unknown): {
  outcome: string;
  replayed: boolean;
  retryable: boolean;
  result?: unknown;
  error?: { code: string; message: string };
} {
  return (answer as { structuredContent: never }).structuredContent;
}

/**
 * An HTTP relay in front of a streamable-HTTP upstream: passes every request and its (streamed) answer through, and
 * records each `tools/call` it forwards with the Authorization header it carried.
 */
export interface HttpRelay {
  url: string;
  calls: Array<RelayedCall & { authorization?: string }>;
  /** Every Authorization header that reached the upstream, on any request. */
  authorizations: Set<string>;
  /** The method of every JSON-RPC request it forwarded (`initialize`, `tools/list`, ...), in order. */
  methods: string[];
  close(): Promise<void>;
}

/**
 * What a relay answers itself instead of forwarding (a test's resource server: 401 + WWW-Authenticate, its
 * protected-resource metadata); undefined to forward. A request it answers is neither forwarded nor recorded.
 */
export interface RelayAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}
export type RelayGuard = (req: import('node:http').IncomingMessage, body: Buffer, relayUrl: string) => Promise<RelayAnswer | undefined>;

/**
 * What a relay answers in place of the upstream's answer to a request it forwarded (a proxy failing on the way back:
 * the upstream ran the request, its answer is read to the end and dropped); undefined to pass the answer on.
 */
export type RelayReplacement = (body: Buffer) => RelayAnswer | undefined;

export async function startHttpRelay(
  upstream: string,
  options: { guard?: RelayGuard; replaceAnswer?: RelayReplacement } = {},
): Promise<HttpRelay> {
  const { createServer, request } = await import('node:http');
  const target = new URL(upstream);
  const calls: HttpRelay['calls'] = [];
  const authorizations = new Set<string>();
  const methods: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const own = await options.guard?.(req, body, url).catch((): RelayAnswer => ({ status: 500 }));
      if (own) {
        res.writeHead(own.status, own.headers).end(own.body);
        return;
      }
      const authorization = req.headers.authorization;
      if (authorization) authorizations.add(authorization);
      try {
        const messages = [JSON.parse(body.toString('utf8') || 'null')].flat();
        for (const message of messages) if (typeof message?.method === 'string' && message.id !== undefined) methods.push(message.method);
        for (const message of messages)
          if (message?.method === 'tools/call')
            calls.push({ name: message.params.name, arguments: message.params.arguments ?? {}, at: Date.now(), authorization });
      } catch {
        // not JSON: passed on as is
      }
      const forward = request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } },
        (answer) => {
          const replacement = options.replaceAnswer?.(body);
          if (replacement) {
            answer.resume();
            answer.once('end', () => res.writeHead(replacement.status, replacement.headers).end(replacement.body));
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
  return {
    url,
    calls,
    authorizations,
    methods,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The gateway in front of server-everything (streamable HTTP) through an HTTP relay, as most gateway tests set it up. */
export interface EverythingGateway {
  relay: HttpRelay;
  gateway: TestGateway;
  /** The `echo` calls with this message that reached the upstream. */
  echoes(message: string): HttpRelay['calls'];
  stop(): Promise<void>;
}

/**
 * Starts server-everything, a relay in front of it and the gateway in front of the relay. `credentials`: the
 * credentials file's content (written to a file and given with --credentials, as a user does), or a source of the
 * test's own (Secrets Manager's, as deployed). `guard`: what the relay answers itself (a resource server's 401).
 */
export async function startEverythingGateway(options: {
  policy: unknown;
  credentials: CredentialsFile | CredentialSource;
  guard?: RelayGuard;
}): Promise<EverythingGateway> {
  const stops: Array<() => unknown> = [];
  const stop = async () => {
    for (const step of stops.splice(0).reverse()) await step();
  };
  try {
    const everything = await startEverything();
    stops.push(() => everything.stop());
    const relay = await startHttpRelay(everything.url, { guard: options.guard });
    stops.push(() => relay.close());
    let gateway: TestGateway;
    if ('forTenant' in options.credentials) {
      gateway = await startTestGateway({ policy: options.policy, argv: ['--upstream-url', relay.url], credentials: options.credentials });
    } else {
      const dir = await scratch('credentials');
      stops.push(() => dir.cleanup());
      const file = join(dir.dir, 'credentials.json');
      await writeFile(file, JSON.stringify(options.credentials), { mode: 0o600 });
      gateway = await startTestGateway({ policy: options.policy, argv: ['--upstream-url', relay.url, '--credentials', file] });
    }
    stops.push(() => gateway.stop());
    return {
      relay,
      gateway,
      echoes: (message) => relay.calls.filter((call) => call.name === 'echo' && call.arguments.message === message),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
