/**
 * A team's own MCP server (SDK v2 `McpServer`) with one idempotent write tool, through `registerWriteTool`, on
 * DynamoDB (Local here). Run: DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npx tsx examples/own-mcp-server/server.ts
 * Tokens are this example's own (`Bearer <tenant>.<shared secret>`): use your real bearer verification instead.
 */
import { randomUUID } from 'node:crypto';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { serve } from '@hono/node-server';
import * as z from 'zod';
import { closeDynamoDbClient, createDynamoDbClient, DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import { createToolRuntime, defineWriteTool, registerWriteTool, type ToolRuntime } from 'idempotent-mcp/mcp';

/** The services this team's tools need: the tool runtime plus its own client (here an in-memory invoice book). */
interface InvoiceServices extends ToolRuntime {
  invoices: Map<string, { invoice_id: string; customer: string; amount_minor: number }>;
}

export const createInvoice = defineWriteTool({
  name: 'create_invoice',
  title: 'Create invoice',
  description: 'Creates an invoice for a customer.',
  input: { customer: z.string().min(1).max(64), amount_minor: z.number().int().positive() },
  result: z.object({ invoice_id: z.string(), customer: z.string(), amount_minor: z.number() }),
  annotations: { destructiveHint: false, openWorldHint: false },
  async execute(args, ctx: { services: InvoiceServices; tenant: string }) {
    const invoice = { invoice_id: `inv_${randomUUID()}`, ...args };
    ctx.services.invoices.set(`${ctx.tenant}/${invoice.invoice_id}`, invoice);
    return { result: invoice };
  },
});

export interface StartedServer {
  url: string;
  services: InvoiceServices;
  /** A token this example accepts for `tenant`. */
  tokenFor(tenant: string): string;
  stop(): Promise<void>;
}

export async function startInvoiceServer(options: { dynamodbEndpoint?: string; tableName?: string; port?: number } = {}): Promise<StartedServer> {
  const doc = createDynamoDbClient({ endpoint: options.dynamodbEndpoint ?? process.env.DYNAMODB_ENDPOINT });
  const tableName = options.tableName ?? `invoices-${randomUUID()}`;
  await ensureTable(doc, tableName);
  const secret = process.env.EXAMPLE_SECRET ?? randomUUID() + randomUUID();
  const services: InvoiceServices = {
    ...createToolRuntime({ store: new DynamoDbIdempotencyStore(doc, tableName), secret }),
    invoices: new Map(),
  };

  // One new McpServer per request (stateless): both MCP eras, 2026-07-28 and 2025.
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'invoices', version: '1.0.0' });
    registerWriteTool(server, createInvoice, { services, tenant: (authInfo) => String(authInfo?.extra?.tenant) });
    return server;
  });
  const http = serve({
    port: options.port ?? 0,
    hostname: '127.0.0.1',
    fetch: (request) => {
      const [tenant, given] = (request.headers.get('authorization') ?? '').replace(/^Bearer /, '').split('.');
      if (!tenant || given !== secret) return new Response('unauthorized', { status: 401 });
      return handler.fetch(request, { authInfo: { token: '', clientId: tenant, scopes: [], extra: { tenant } } });
    },
  });
  await new Promise<void>((resolve) => http.once('listening', () => resolve()));
  const address = http.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    services,
    tokenFor: (tenant) => `${tenant}.${secret}`,
    stop: async () => {
      await handler.close();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      closeDynamoDbClient(doc);
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const started = await startInvoiceServer({ port: Number(process.env.PORT ?? 3100) });
  console.log(`invoices MCP server on ${started.url}; token for tenant acme: ${started.tokenFor('acme')}`);
}
