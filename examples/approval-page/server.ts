/**
 * A team's own MCP server whose payment tool runs only after a person of the tenant approves it on the approval
 * page, signed in at the team's OpenID Connect issuer: the tool (`confirmation: 'approval'`), the approval store in
 * the same DynamoDB table as the records, and the page, served by the same HTTP server as /mcp.
 * Run: DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npx tsx server.ts (with the stand-in issuer of issuer.ts).
 * Agents' tokens are this example's own (`Bearer <tenant>.<shared secret>`): use your real bearer verification.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { type AuthInfo, createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { serve } from '@hono/node-server';
import * as z from 'zod';
import { createDynamoDbClient, DynamoDbApprovalStore, DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import {
  approvalPage,
  createToolRuntime,
  defineWriteTool,
  getOperationStatusTool,
  registerReadTool,
  registerWriteTool,
  serverInstructions,
  type ToolRuntime,
  type WriteToolContext,
} from 'idempotent-mcp/mcp';
import { startStandInIssuer } from './issuer.js';

export interface Payment {
  payment_id: string;
  supplier: string;
  amount_minor: number;
  currency: string;
}

/** The team's payments system (in memory here), which files each payment under the caller's key. */
export class PaymentsBook {
  readonly byKey = new Map<string, Payment>();

  async pay(tenant: string, key: string, fields: Omit<Payment, 'payment_id'>): Promise<Payment> {
    const payment = { payment_id: `pay_${randomUUID()}`, ...fields };
    this.byKey.set(`${tenant}/${key}`, payment);
    return payment;
  }
}

export type PaymentServices = ToolRuntime & { payments: PaymentsBook };

/** `1250, 'EUR'` -> `12.50 EUR`: the amount by the currency's own minor unit (Intl knows each currency's digits). */
export function formatMinorUnits(amountMinor: number, currency: string): string {
  const digits = new Intl.NumberFormat('en-US', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  const amount = new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return `${amount.format(amountMinor / 10 ** digits)} ${currency}`;
}

export const payInvoice = defineWriteTool({
  name: 'pay_invoice',
  title: 'Pay invoice',
  description: 'Pays a supplier, once a person of your organisation has approved the payment on the approval page.',
  input: {
    supplier: z.string().regex(/^[a-z0-9-]{1,32}$/),
    amount_minor: z.number().int().positive().max(100_000_000),
    currency: z.enum(['EUR', 'USD', 'JPY']),
  },
  result: z.object({ payment_id: z.string(), supplier: z.string(), amount_minor: z.number(), currency: z.string() }),
  annotations: { destructiveHint: false, openWorldHint: true },
  // The person approves each payment on the page, signed in; what they read there is this line.
  confirmation: 'approval',
  summarize: ({ supplier, amount_minor, currency }) => `Pay ${formatMinorUnits(amount_minor, currency)} to ${supplier}`,
  async execute(args, ctx: WriteToolContext<PaymentServices>) {
    return { result: await ctx.services.payments.pay(ctx.tenant, ctx.idempotencyKey, args) };
  },
});

export interface StartedServer {
  url: string;
  services: PaymentServices;
  tokenFor(tenant: string): string;
  stop(): Promise<void>;
}

export interface PaymentServerOptions {
  /** Your issuer and the page's client there. */
  signIn: Parameters<typeof approvalPage>[0]['signIn'];
  dynamodbEndpoint?: string;
  tableName?: string;
  port?: number;
  payments?: PaymentsBook;
}

export async function startPaymentServer(options: PaymentServerOptions): Promise<StartedServer> {
  const doc = createDynamoDbClient({ endpoint: options.dynamodbEndpoint ?? process.env.DYNAMODB_ENDPOINT });
  const tableName = options.tableName ?? `payments-${randomUUID()}`;
  await ensureTable(doc, tableName);
  const secret = process.env.EXAMPLE_SECRET ?? randomUUID() + randomUUID();

  // The page's address is the server's own (deployed: your https origin, from configuration), known once it listens.
  let route: (request: Request) => Response | Promise<Response> = () => new Response('starting', { status: 503 });
  const http = serve({ port: options.port ?? 0, hostname: '127.0.0.1', fetch: (request) => route(request) });
  await new Promise<void>((resolve) => http.once('listening', () => resolve()));
  const baseUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

  // One approval store for both: the tool opens approvals in it, the page records the person's decision there.
  const approvals = new DynamoDbApprovalStore({ client: doc, tableName });
  const store = new DynamoDbIdempotencyStore({ client: doc, tableName });
  const services = {
    ...createToolRuntime({ store, secret, approvals, publicBaseUrl: baseUrl }),
    payments: options.payments ?? new PaymentsBook(),
  };
  const page = approvalPage({ approvals, secret, baseUrl, signIn: options.signIn });

  const registration = { services, tenant: (authInfo?: AuthInfo) => authInfo?.extra?.tenant };
  const mcp = createMcpHandler(() => {
    const server = new McpServer(
      { name: 'payments', version: '1.0.0' },
      { instructions: serverInstructions([payInvoice, getOperationStatusTool]) },
    );
    registerWriteTool(server, payInvoice, registration);
    registerReadTool(server, getOperationStatusTool, { ...registration, tools: [payInvoice] });
    return server;
  });
  route = (request) => {
    const { pathname } = new URL(request.url);
    // The page authenticates people itself (their sign-in at your issuer), never with an agent's bearer token.
    if (pathname.startsWith('/approvals/')) return page.fetch(request);
    if (pathname !== '/mcp') return new Response('not found', { status: 404 });
    const [tenant, given] = (request.headers.get('authorization') ?? '').replace(/^Bearer /, '').split('.');
    if (!tenant || given !== secret) return new Response('unauthorized', { status: 401 });
    return mcp.fetch(request, { authInfo: { token: '', clientId: tenant, scopes: [], extra: { tenant } } });
  };
  return {
    url: `${baseUrl}/mcp`,
    services,
    tokenFor: (tenant) => `${tenant}.${secret}`,
    stop: async () => {
      await mcp.close();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      doc.destroy();
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const issuer = await startStandInIssuer();
  issuer.signInAs({ sub: 'alice', tenant: 'acme' });
  const started = await startPaymentServer({ signIn: issuer.signIn, port: Number(process.env.PORT ?? 3200) });
  console.log(`payments MCP server on ${started.url}; token for tenant acme: ${started.tokenFor('acme')}`);
}
