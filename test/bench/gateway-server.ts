/**
 * One of the two servers the `gateway` bench section (test/bench/gateway.ts) loads, in a process of its own so that
 * the load generator and the other server do not share its event loop. `argv[2]` names which:
 *
 * - `gateway`: the gateway command as a team runs it (`idempotent-mcp gateway --upstream-url`: the endpoint's HTTP
 *   app, bearer verification with the dev issuer, MCP, engine, DynamoDB Local, the upstream over a kept MCP client).
 * - `relay`: the floor (issue 46): a bare relay doing only what a retry-safe gateway cannot skip. It verifies the
 *   agent's token (the same verifier and issuer), writes one conditional claim, forwards the call with an MCP client
 *   over a kept connection, and writes one completion; served by a bare stateless MCP server of the same SDK on the
 *   same HTTP adapter. No fingerprint, no lease, no reconciliation: nothing it does could be left out.
 *
 * Both read DYNAMODB_ENDPOINT, BENCH_UPSTREAM_URL and BENCH_STATE_DIR (the gateway's dev issuer lives there: the
 * relay accepts the same token) from the environment, and tell their parent (IPC) where they listen. The parent asks
 * each for its CPU time, its counts (DynamoDB requests by the shared counter, requests that reached the upstream by
 * JSON-RPC method) and a V8 CPU profile over the turns it names (`gateway-profile.ts`).
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { answerProfileCommand, type ProfileCommand } from './cpu-profile';
import { GATEWAY_POLICY } from './gateway-policy';
import { join } from 'node:path';
import { countDynamoDbRequests, type RequestCounter } from '../support/dynamodb-request-counter';

export interface GatewayServerReady {
  mcpUrl: string;
  token: string;
}

export interface ServerCounts {
  dynamodb: Record<string, number>;
  /** Requests that reached the upstream, by JSON-RPC method (`GET` for the event stream). */
  upstream: Record<string, number>;
}

const BENCH_TENANT = 'demo';

const env = process.env;
const upstreamUrl = env.BENCH_UPSTREAM_URL!;
const stateDir = env.BENCH_STATE_DIR!;

// Every request that reaches the upstream goes through fetch (the SDK's streamable-HTTP client): counted by method.
const upstream: Record<string, number> = {};
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  if (url.startsWith(upstreamUrl)) {
    let methods = [init?.method ?? 'GET'];
    if (typeof init?.body === 'string')
      try {
        methods = [JSON.parse(init.body)].flat().map((m: { method?: string; id?: unknown }) => m.method ?? 'response');
      } catch {
        // not JSON: counted by its HTTP method
      }
    for (const method of methods) upstream[method] = (upstream[method] ?? 0) + 1;
  }
  return realFetch(input, init);
};

async function startGateway(): Promise<{ ready: GatewayServerReady; requests: RequestCounter; stop: () => Promise<void> }> {
  // As `npm start` does locally: metrics would only add EMF lines. Logs stay at INFO (a deployment's one line per call).
  env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const { parseGatewayCommand, startGatewayCommand } = await import('../../lambdas/gateway/command');
  const policyFile = join(stateDir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(GATEWAY_POLICY));
  const running = await startGatewayCommand(
    parseGatewayCommand(['--policy', policyFile, '--port', '0', '--state-dir', stateDir, '--upstream-url', upstreamUrl], env),
    env,
  );
  return {
    ready: { mcpUrl: running.mcpUrl, token: await running.tokenFor(BENCH_TENANT) },
    requests: countDynamoDbRequests(running.doc),
    stop: running.stop,
  };
}

async function startRelay(): Promise<{ ready: GatewayServerReady; requests: RequestCounter; stop: () => Promise<void> }> {
  const z = await import('zod');
  const { McpServer, createMcpHandler } = await import('@modelcontextprotocol/server');
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const { serve } = await import('@hono/node-server');
  const { PutCommand, UpdateCommand } = await import('@aws-sdk/lib-dynamodb');
  const { loadConfig } = await import('../../lambdas/config');
  const { createTokenVerifier } = await import('../../lambdas/auth/verifier');
  const { devIssuerFor } = await import('../../lambdas/auth/dev-issuer');
  const { closeDynamoDbClient, createDynamoDbClient } = await import('../../lambdas/store/clients');
  const { ensureTable } = await import('../../lambdas/store/table-schema');

  // The gateway's issuer (its state folder) and verifier: the same token, verified the same way.
  const config = loadConfig({ ...env, AUTH_MODE: 'dev', DEV_AUTH_DIR: join(stateDir, 'auth'), OPERATION_ID_SECRET: 'x'.repeat(32) });
  if (config.auth.mode !== 'dev') throw new Error('the relay runs with the dev issuer');
  const verifier = createTokenVerifier(config.auth);
  const doc = createDynamoDbClient({ endpoint: env.DYNAMODB_ENDPOINT });
  const tableName = `bench-relay-${randomUUID().slice(0, 8)}`;
  await ensureTable(doc, tableName);
  const upstreamClient = new Client({ name: 'bench-relay', version: '1.0.0' });
  const { withRequestSignals } = await import('../../lambdas/core/request-signals');
  // The kept connection's requests get their own abort signals, as the gateway's do: the floor stays comparable.
  await upstreamClient.connect(
    new StreamableHTTPClientTransport(new URL(upstreamUrl), { fetch: withRequestSignals((url, init) => fetch(url, init)) }),
  );

  const inputSchema = z.object({ message: z.string(), idempotency_key: z.string() });
  const handler = createMcpHandler(({ authInfo }) => {
    const tenant = authInfo?.clientId ?? '';
    const server = new McpServer({ name: 'bench-relay', version: '1.0.0' });
    server.registerTool('echo', { description: 'Echoes the message, once per key.', inputSchema }, async ({ message, idempotency_key }) => {
      const Key = { pk: `RELAY#${tenant}#${idempotency_key}`, sk: 'IDEM' };
      const owner = randomUUID();
      await doc.send(
        new PutCommand({
          TableName: tableName,
          Item: { ...Key, status: 'PROCESSING', owner_token: owner },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      const answer = await upstreamClient.callTool({ name: 'echo', arguments: { message } });
      const result = { content: answer.content };
      await doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key,
          UpdateExpression: 'SET #s = :done, #r = :result',
          ConditionExpression: 'owner_token = :owner',
          ExpressionAttributeNames: { '#s': 'status', '#r': 'result' },
          ExpressionAttributeValues: { ':done': 'SUCCEEDED', ':result': result, ':owner': owner },
        }),
      );
      const structured = { outcome: 'succeeded', replayed: false, result };
      return { content: [{ type: 'text' as const, text: JSON.stringify(structured) }], structuredContent: structured };
    });
    return server;
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve(
      {
        fetch: async (request) => {
          let tenant: string;
          try {
            tenant = (await verifier.verify(request.headers.get('authorization') ?? undefined)).tenant;
          } catch {
            return new Response('unauthorized', { status: 401 });
          }
          return handler.fetch(request, { authInfo: { token: '', clientId: tenant, scopes: [] } });
        },
        port: 0,
        hostname: '127.0.0.1',
      },
      () => resolve(s),
    );
    s.once('error', reject);
  });
  const token = await (await devIssuerFor(config.auth)).sign({ tenant: BENCH_TENANT });
  return {
    ready: { mcpUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, token },
    requests: countDynamoDbRequests(doc),
    stop: async () => {
      server.close();
      await upstreamClient.close();
      closeDynamoDbClient(doc);
    },
  };
}

const kind = process.argv[2];
if (kind !== 'gateway' && kind !== 'relay') throw new Error(`usage: gateway-server.ts gateway|relay (got ${kind})`);
const started = await (kind === 'gateway' ? startGateway() : startRelay());
process.once('disconnect', () => void started.stop().then(() => process.exit(0)));
process.send!({ ready: started.ready });

const reset = (counts: Record<string, number>) => {
  for (const key of Object.keys(counts)) delete counts[key];
};
process.on('message', (message) => {
  if (message === 'cpu') process.send!({ cpu: process.cpuUsage() });
  else if (message === 'counts') {
    process.send!({ counts: { dynamodb: { ...started.requests.byOperation }, upstream: { ...upstream } } satisfies ServerCounts });
    started.requests.reset();
    reset(upstream);
  } else if (typeof message === 'object' && message !== null && 'profile' in message)
    void answerProfileCommand(message.profile as ProfileCommand);
});
