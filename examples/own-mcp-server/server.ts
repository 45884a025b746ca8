/**
 * A team's own MCP server (SDK v2 `McpServer`) with one idempotent write tool, through `registerWriteTool`, on
 * DynamoDB (Local here), and the reconciler that settles its lost outcomes, in the same process.
 * Run: DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npx tsx examples/own-mcp-server/server.ts
 * Tokens are this example's own (`Bearer <tenant>.<shared secret>`): use your real bearer verification instead.
 */
import { randomUUID } from 'node:crypto';
import { type AuthInfo, createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { serve } from '@hono/node-server';
import * as z from 'zod';
import { createDynamoDbClient, DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import {
  createToolRuntime,
  defineWriteTool,
  getOperationStatusTool,
  registerReadTool,
  registerWriteTool,
  serverInstructions,
  startReconciler,
  type ToolRuntime,
  type ToolsModule,
  type WriteToolContext,
} from 'idempotent-mcp/mcp';

export interface Invoice {
  invoice_id: string;
  customer: string;
  amount_minor: number;
}

/**
 * The team's invoicing system (in memory here). It files each invoice under the caller's idempotency key, so the
 * reconciler can ask it what became of a call whose answer was lost.
 */
export class InvoiceBook {
  readonly byKey = new Map<string, Invoice>();

  async create(tenant: string, key: string, fields: Omit<Invoice, 'invoice_id'>, _signal?: AbortSignal): Promise<Invoice> {
    const invoice = { invoice_id: `inv_${randomUUID()}`, ...fields };
    this.byKey.set(`${tenant}/${key}`, invoice);
    return invoice;
  }

  async findByKey(tenant: string, key: string): Promise<Invoice | undefined> {
    return this.byKey.get(`${tenant}/${key}`);
  }
}

/** The services this team's tools need: the tool runtime plus its own client. */
export type InvoiceServices = ToolRuntime & { invoices: InvoiceBook };

export const createInvoice = defineWriteTool({
  name: 'create_invoice',
  title: 'Create invoice',
  description: 'Creates an invoice for a customer.',
  input: { customer: z.string().min(1).max(64), amount_minor: z.number().int().positive() },
  result: z.object({ invoice_id: z.string(), customer: z.string(), amount_minor: z.number() }),
  annotations: { destructiveHint: false, openWorldHint: true },
  async execute(args, ctx: WriteToolContext<InvoiceServices>) {
    return { result: await ctx.services.invoices.create(ctx.tenant, ctx.idempotencyKey, args, ctx.signal) };
  },
  // When a call's outcome was lost (the invoicing system timed out after it may have filed the invoice), the
  // reconciler asks it by our key: found settles the call with that invoice; absent lets a retry create it.
  async reconcile({ record }, services) {
    const invoice = await services.invoices.findByKey(record.tenant, record.idempotencyKey);
    return invoice ? { kind: 'found', result: invoice } : { kind: 'absent' };
  },
});

/**
 * The tools module: the tools, and `withClients`, which adds the clients they call to the services it is given
 * (the tool runtime here, the reconciler's services for the reconcile hooks).
 */
export function invoiceTools(invoices: InvoiceBook) {
  return {
    tools: [createInvoice],
    withClients: <B extends object>(services: B) => ({ ...services, invoices }),
  } satisfies ToolsModule<InvoiceServices>;
}

export interface StartedServer {
  url: string;
  services: InvoiceServices;
  /** A token this example accepts for `tenant`. */
  tokenFor(tenant: string): string;
  stop(): Promise<void>;
}

export interface InvoiceServerOptions {
  dynamodbEndpoint?: string;
  tableName?: string;
  port?: number;
  /** The invoicing system's client. Default a new in-memory one. */
  invoices?: InvoiceBook;
  /** Time between reconciler runs. Default one minute. */
  reconcileIntervalMs?: number;
}

export async function startInvoiceServer(options: InvoiceServerOptions = {}): Promise<StartedServer> {
  const doc = createDynamoDbClient({ endpoint: options.dynamodbEndpoint ?? process.env.DYNAMODB_ENDPOINT });
  const tableName = options.tableName ?? `invoices-${randomUUID()}`;
  await ensureTable(doc, tableName);
  const secret = process.env.EXAMPLE_SECRET ?? randomUUID() + randomUUID();
  const store = new DynamoDbIdempotencyStore({ client: doc, tableName });
  const { tools, withClients } = invoiceTools(options.invoices ?? new InvoiceBook());
  const services = withClients(createToolRuntime({ store, secret }));
  // Settles calls whose outcome was lost (`unknown`) through the tools' reconcile hooks, with the same clients.
  // Its logs and metrics go to standard error: standard output stays the protocol's (a stdio server's).
  const reconciler = startReconciler({
    tools,
    withClients,
    store,
    intervalMs: options.reconcileIntervalMs,
    metrics: { namespace: 'Invoices' },
  });

  // The tenant your verification found, or nothing: a call without one is refused and nothing runs.
  const registration = { services, tenant: (authInfo?: AuthInfo) => authInfo?.extra?.tenant };
  // One new McpServer per request (stateless): both MCP eras, 2026-07-28 and 2025. Beside the write tool, the
  // toolkit's get_operation_status answers what became of its calls; the instructions name only what is served.
  const handler = createMcpHandler(() => {
    const server = new McpServer(
      { name: 'invoices', version: '1.0.0' },
      { instructions: serverInstructions([createInvoice, getOperationStatusTool]) },
    );
    registerWriteTool(server, createInvoice, registration);
    registerReadTool(server, getOperationStatusTool, { ...registration, tools: [createInvoice] });
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
      await reconciler.stop();
      await handler.close();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      doc.destroy();
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const started = await startInvoiceServer({ port: Number(process.env.PORT ?? 3300) });
  console.log(`invoices MCP server on ${started.url}; token for tenant acme: ${started.tokenFor('acme')}`);
}
