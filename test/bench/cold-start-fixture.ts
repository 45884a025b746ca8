import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadDevIssuer } from '../../lambdas/auth/dev-issuer';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { ensureTable } from '../../lambdas/store/table-schema';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { orderArgs } from '../support/mcp';

/**
 * What a cold MCP function runs in, for the cold-start section (test/bench/cold-start.ts) and the CDK bundle tests:
 * the fresh Node process that imports a bundle and answers two Function URL events (the child script), the table and
 * the JWKS around it (`startColdStartFixture`), the events themselves (`functionUrlEvent`), and the tool calls the
 * section measures (the gateway's policy is gateway-policy.ts).
 */

const MARK = '@@cold-start@@';
/** Where the section builds its bundles, and where the fixture writes its child script unless told otherwise. */
export const COLD_START_WORK_DIR = resolve('.bench/cold-start');
const PROTOCOL_VERSION = '2025-06-18';
const TENANT = 'bench-tenant';

/** Runs in the fresh process: import the bundle, then two invocations, timed from the process's own start. */
const CHILD = `
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
const booted = performance.now();
const eluAtBoot = performance.eventLoopUtilization();
const bootCpu = (({ user, system }) => (user + system) / 1000)(process.cpuUsage());
const { handler } = await import(pathToFileURL(process.argv[2]).href);
// A pause before the first event (test/bench/cold-start-candidates.ts): an environment initialised ahead of its first
// request (provisioned concurrency, Lambda's proactive init), whose init work has settled when the event comes.
if (process.env.COLD_START_PAUSE_MS) await new Promise((r) => setTimeout(r, Number(process.env.COLD_START_PAUSE_MS)));
const imported = performance.now();
const { initialize, call } = JSON.parse(process.env.COLD_START_EVENTS);
const context = { functionName: 'mcp', awsRequestId: 'cold-start', getRemainingTimeInMillis: () => 29000, callbackWaitsForEmptyEventLoop: true };
const first = await handler(initialize, context);
const initialized = performance.now();
const second = await handler(call, context);
const called = performance.now();
const cpu = process.cpuUsage();
const waitMs = performance.eventLoopUtilization(eluAtBoot).idle;
process.stdout.write('\\n${MARK}' + JSON.stringify({ booted, bootCpu, imported, initialized, called, waitMs, cpuMs: (cpu.user + cpu.system) / 1000, statuses: [first.statusCode, second.statusCode], body: second.body }) + '\\n');
process.exit(0);
`;

export interface ChildTimes {
  booted: number;
  /** CPU ms (all threads) the process had used at `booted`, and at the end. */
  bootCpu: number;
  cpuMs: number;
  /** Event-loop idle time over the span: waiting on I/O (DynamoDB Local, the key set server). */
  waitMs: number;
  imported: number;
  initialized: number;
  called: number;
  statuses: number[];
  body: string;
}

/** A Lambda Function URL event carrying one MCP POST (2025-06-18 headers unless `headers` says otherwise). */
export function functionUrlEvent(body: string, token: string, headers: Record<string, string> = {}) {
  const domain = 'abcdefghijklmnop.lambda-url.us-east-1.on.aws';
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/mcp',
    rawQueryString: '',
    headers: {
      host: domain,
      'x-forwarded-proto': 'https',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      authorization: `Bearer ${token}`,
      'content-length': String(Buffer.byteLength(body)),
      ...headers,
    },
    requestContext: {
      accountId: 'anonymous',
      apiId: 'abcdefghijklmnop',
      domainName: domain,
      domainPrefix: 'abcdefghijklmnop',
      http: { method: 'POST', path: '/mcp', protocol: 'HTTP/1.1', sourceIp: '198.51.100.7', userAgent: 'cold-start-bench' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: new Date().toUTCString(),
      timeEpoch: Date.now(),
    },
    body,
    isBase64Encoded: false,
  };
}

const rpc = (id: number, method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

/** Spawns `node args` with `env`; returns the wall time to exit and its stdout. */
export function runNode(args: string[], env: NodeJS.ProcessEnv): Promise<{ wallMs: number; stdout: string }> {
  return new Promise((resolvePromise, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const wallMs = performance.now() - started;
      if (code !== 0) reject(new Error(`node ${args.join(' ')} exited with ${code}: ${stderr.slice(-2000)}`));
      else resolvePromise({ wallMs, stdout });
    });
  });
}

export const echoCall: ToolCallOf = (unique) => ({ name: 'echo', arguments: { message: unique, idempotency_key: unique } });

/** The `tools/call` a cold process answers, its arguments made unique per run; default a create_order. */
type ToolCallOf = (unique: string) => { name: string; arguments: Record<string, unknown> };
const createOrderCall: ToolCallOf = (unique) => ({ name: 'create_order', arguments: orderArgs(unique) });

export interface ColdStartFixture {
  /** One cold process: imports the bundle, answers initialize and a create_order tools/call; checks both succeeded. */
  run(
    bundleFile: string,
    nodeArgs?: string[],
    extraEnv?: NodeJS.ProcessEnv,
    toolCall?: ToolCallOf,
  ): Promise<ChildTimes & { wallMs: number; stdout: string }>;
  /** The deployed function's environment, with the local endpoints. */
  env: NodeJS.ProcessEnv;
  /** A bearer token the function accepts. */
  token: string;
  stop(): Promise<void>;
}

/**
 * What a cold MCP function needs around it: a table (on `dynamodbEndpoint`, or a DynamoDB Local started here), a
 * JWKS served over loopback with a token of its issuer (the deployed OIDC path), and the child script.
 */
export async function startColdStartFixture(options: { dynamodbEndpoint?: string; workDir?: string } = {}): Promise<ColdStartFixture> {
  const stops: Array<() => Promise<unknown>> = [];
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s().catch(() => {});
  };
  try {
    const workDir = options.workDir ?? COLD_START_WORK_DIR;
    await mkdir(workDir, { recursive: true });
    const childScript = join(workDir, 'child.mjs');
    await writeFile(childScript, CHILD);

    let endpoint = options.dynamodbEndpoint;
    if (!endpoint) {
      const dynamo = await startDynamoDbLocal();
      stops.push(dynamo.stop);
      endpoint = dynamo.endpoint;
    }
    const doc = createDynamoDbClient({ endpoint: endpoint });
    const tableName = `cold-start-${randomUUID()}`;
    await ensureTable(doc, tableName);
    closeDynamoDbClient(doc);

    const keyDir = await mkdtemp(join(tmpdir(), 'cold-start-issuer-'));
    stops.push(() => rm(keyDir, { recursive: true, force: true }));
    const issuerUrl = 'https://cold-start.test/issuer';
    const issuer = await loadDevIssuer({ dir: keyDir, issuer: issuerUrl, audience: 'cold-start', tenantClaim: 'tenant' });
    const jwksServer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(issuer.jwks));
    });
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
    stops.push(() => new Promise((r) => jwksServer.close(r)));
    const token = await issuer.sign({ tenant: TENANT });

    // The deployed environment, with the local endpoints (and the secret's value instead of its ARN).
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      AWS_REGION: 'us-east-1',
      AWS_LAMBDA_FUNCTION_NAME: 'mcp-cold-start',
      TABLE_NAME: tableName,
      DYNAMODB_ENDPOINT: endpoint,
      AUTH_MODE: 'oidc',
      AUTH_ISSUER: issuerUrl,
      AUTH_AUDIENCE: 'cold-start',
      AUTH_JWKS_URL: `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/.well-known/jwks.json`,
      AUTH_TENANT_CLAIM: 'tenant',
      OPERATION_ID_SECRET: randomBytes(32).toString('base64url'),
      ALLOWED_ORIGINS: '',
      RECONCILE_INTERVAL_MS: '60000',
      POWERTOOLS_SERVICE_NAME: 'idempotent-mcp',
      POWERTOOLS_METRICS_NAMESPACE: 'IdempotentMcp',
      POWERTOOLS_LOG_LEVEL: 'WARN',
    };
    const eventsFor = (toolCall: ToolCallOf) =>
      JSON.stringify({
        initialize: functionUrlEvent(
          rpc(1, 'initialize', { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'cold-start', version: '1' } }),
          token,
        ),
        call: functionUrlEvent(rpc(2, 'tools/call', toolCall(`cold-start-${randomUUID()}`)), token),
      });

    const run = async (
      bundleFile: string,
      nodeArgs: string[] = [],
      extraEnv: NodeJS.ProcessEnv = {},
      toolCall: ToolCallOf = createOrderCall,
    ): Promise<ChildTimes & { wallMs: number; stdout: string }> => {
      const { wallMs, stdout } = await runNode([...nodeArgs, childScript, bundleFile], {
        ...env,
        ...extraEnv,
        COLD_START_EVENTS: eventsFor(toolCall),
      });
      const line = stdout.split('\n').find((l) => l.startsWith(MARK));
      if (!line) throw new Error(`${bundleFile} printed no result`);
      const times = JSON.parse(line.slice(MARK.length)) as ChildTimes;
      const outcome = (JSON.parse(times.body) as { result?: { structuredContent?: { outcome?: string } } }).result?.structuredContent
        ?.outcome;
      // Only a run that really executed the write counts: otherwise it measured something else.
      if (times.statuses.some((status) => status !== 200) || outcome !== 'succeeded') {
        throw new Error(`${bundleFile} answered ${times.statuses.join('/')} with outcome ${outcome}: ${times.body.slice(0, 300)}`);
      }
      return { ...times, wallMs, stdout };
    };
    return { run, env, token, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
