/**
 * One of the two servers the `endpoint` bench section (test/bench/endpoint.ts) loads, in a process of its own so that
 * the load generator and the other server do not share its event loop. `argv[2]` names which:
 *
 * - `endpoint`: the local endpoint as `npm start` builds it (reference/local/stack.ts: HTTP app, bearer verification with the
 *   dev issuer, MCP, engine, DynamoDB Local), with the background workers off (deployed, they are functions of
 *   their own, and create_order gives them nothing to do).
 * - `bare`: a bare stateless MCP server from the same SDK (v2 `@modelcontextprotocol/server`, `createMcpHandler`, a
 *   new `McpServer` per request, JSON answers) on the same HTTP adapter, answering `create_order` with one
 *   unprotected PutItem: no auth, no idempotency.
 *
 * Both use DYNAMODB_ENDPOINT from the environment; each tells its parent (IPC) where it listens once it does.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { answerProfileCommand, type ProfileCommand } from './cpu-profile';

export interface ServerReady {
  url: string;
  /** The bearer token to send (the bare server ignores it). */
  token: string;
  tableName: string;
  /** The tenant the token names. */
  tenant: string;
}

const TENANT = 'bench-tenant';

async function startEndpoint(): Promise<ServerReady> {
  // As `npm start` does (scripts/start.ts): locally, metrics would only add EMF lines.
  process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const { startLocalStack } = await import('../support/local-stack');
  const stack = await startLocalStack({ workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false } });
  process.once('disconnect', () => void stack.stop().then(() => process.exit(0)));
  return { url: stack.mcpUrl, token: await stack.tokenFor(TENANT), tableName: stack.config.tableName, tenant: TENANT };
}

async function startBare(): Promise<ServerReady> {
  const z = await import('zod');
  const { McpServer, createMcpHandler } = await import('@modelcontextprotocol/server');
  const { serve } = await import('@hono/node-server');
  const { PutCommand } = await import('@aws-sdk/lib-dynamodb');
  const { closeDynamoDbClient, createDynamoDbClient } = await import('../../lambdas/store/clients');
  const { ensureTable } = await import('../../lambdas/store/table-schema');

  // The same SDK client as the engine's endpoint: the comparison is the engine, not the client.
  const doc = createDynamoDbClient({ endpoint: process.env.DYNAMODB_ENDPOINT });
  const tableName = `bench-bare-${randomUUID().slice(0, 8)}`;
  await ensureTable(doc, tableName);
  const inputSchema = z.object({
    idempotency_key: z.string(),
    customer_id: z.string(),
    items: z.array(z.object({ sku: z.string(), quantity: z.number().int().positive() })).min(1),
    currency: z.string().length(3),
  });
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'bare', version: '1.0.0' });
      server.registerTool('create_order', { description: 'Creates an order.', inputSchema }, async ({ idempotency_key, ...order }) => {
        const orderId = `ord_${randomUUID()}`;
        const item = { order_id: orderId, status: 'created', ...order, created_at: new Date().toISOString() };
        await doc.send(
          new PutCommand({ TableName: tableName, Item: { pk: `ORDER#${TENANT}#${orderId}`, sk: 'ORDER', idempotency_key, ...item } }),
        );
        return { content: [{ type: 'text', text: JSON.stringify(item) }], structuredContent: item };
      });
      return server;
    },
    { legacy: 'reject', responseMode: 'json' },
  );
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: (request) => handler.fetch(request), port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    s.once('error', reject);
  });
  process.once('disconnect', () => {
    server.close();
    closeDynamoDbClient(doc);
    process.exit(0);
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, token: 'unused', tableName, tenant: TENANT };
}

const kind = process.argv[2];
if (kind !== 'endpoint' && kind !== 'bare') throw new Error(`usage: endpoint-server.ts endpoint|bare (got ${kind})`);
const ready = await (kind === 'endpoint' ? startEndpoint() : startBare());
process.send!({ ready });
// The parent asks for this process's CPU time around each turn: CPU per call, which the machine's load stretches far
// less than calls per second.
process.on('message', (message) => {
  if (message === 'cpu') process.send!({ cpu: process.cpuUsage() });
  else if (typeof message === 'object' && message !== null && 'profile' in message)
    void answerProfileCommand(message.profile as ProfileCommand);
});
