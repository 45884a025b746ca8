/**
 * What the example promises, checked against a running server: a client of either MCP era calls `create_invoice`
 * twice with one `idempotency_key` and gets one invoice; the retry replays the first result. Arguments the tool does
 * not declare, or invalid ones, are refused and nothing runs; a caller without a tenant is refused; a call whose
 * answer was lost (`unknown`) is settled by the reconciler, and its retry gets the invoice that was filed.
 * Run: DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npm test
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { InvoiceBook, startInvoiceServer, type Invoice, type StartedServer } from './server.js';

const ERAS = { '2026-07-28': { mode: { pin: '2026-07-28' } }, '2025-11-25': { mode: 'legacy' } } as const;

export async function checkRetryReplays(server: StartedServer, era: keyof typeof ERAS): Promise<void> {
  const client = new Client({ name: 'example-test', version: '1' }, { versionNegotiation: ERAS[era] });
  const headers = { Authorization: `Bearer ${server.tokenFor('acme')}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((tool) => tool.name),
      ['create_invoice', 'get_operation_status'],
    );
    const args = { idempotency_key: `inv-${randomUUID()}`, customer: 'c-1', amount_minor: 4200 };
    const first = (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as Record<string, unknown>;
    const again = (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as Record<string, unknown>;
    assert.equal(first.outcome, 'succeeded', JSON.stringify(first));
    assert.equal(first.replayed, false);
    assert.equal(again.outcome, 'succeeded', JSON.stringify(again));
    assert.equal(again.replayed, true);
    assert.deepEqual(again.result, first.result);
    const id = (first.result as { invoice_id: string }).invoice_id;
    assert.equal([...server.services.invoices.byKey.values()].filter((invoice) => invoice.invoice_id === id).length, 1);
  } finally {
    await client.close();
  }
}

async function connect(server: StartedServer, tenant: string): Promise<Client> {
  const client = new Client({ name: 'example-test', version: '1' });
  const headers = { Authorization: `Bearer ${server.tokenFor(tenant)}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
  return client;
}

const answerOf = async (client: Client, args: Record<string, unknown>) =>
  (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as {
    outcome: string;
    error?: { code: string; message: string };
  };

export async function checkContract(server: StartedServer): Promise<void> {
  const filed = server.services.invoices.byKey.size;
  const client = await connect(server, 'acme');
  try {
    const misspelled = await answerOf(client, { idempotency_key: `inv-${randomUUID()}`, customer: 'c-1', amount_minor: 4200, memo: 'x' });
    assert.equal(misspelled.outcome, 'rejected', JSON.stringify(misspelled));
    assert.equal(misspelled.error?.code, 'INVALID_ARGUMENTS');
    assert.match(misspelled.error!.message, /memo/);
    const invalid = await answerOf(client, { idempotency_key: `inv-${randomUUID()}`, customer: 'c-1', amount_minor: -5 });
    assert.equal(invalid.error?.code, 'INVALID_ARGUMENTS', JSON.stringify(invalid));
  } finally {
    await client.close();
  }
  // A token whose tenant is what `String(undefined)` makes: the tenant function found none, so nothing runs.
  const nobody = await connect(server, 'undefined');
  try {
    const refused = await answerOf(nobody, { idempotency_key: `inv-${randomUUID()}`, customer: 'c-1', amount_minor: 4200 });
    assert.equal(refused.outcome, 'rejected', JSON.stringify(refused));
    assert.equal(refused.error?.code, 'UNAUTHORIZED');
  } finally {
    await nobody.close();
  }
  assert.equal(server.services.invoices.byKey.size, filed, 'a refused call filed an invoice');
}

/** The invoicing system files the first invoice and then does not answer in time: the call's outcome is lost. */
export class TimesOutAfterFiling extends InvoiceBook {
  private answered = 0;
  override async create(tenant: string, key: string, fields: Omit<Invoice, 'invoice_id'>, signal?: AbortSignal): Promise<Invoice> {
    const invoice = await super.create(tenant, key, fields, signal);
    if (this.answered++ === 0) throw new DOMException('the invoicing system did not answer in time', 'TimeoutError');
    return invoice;
  }
}

export async function checkUnknownSettles(): Promise<void> {
  const invoices = new TimesOutAfterFiling();
  const server = await startInvoiceServer({ invoices, reconcileIntervalMs: 300 });
  const client = await connect(server, 'acme');
  try {
    const args = { idempotency_key: `inv-${randomUUID()}`, customer: 'c-1', amount_minor: 4200 };
    const lost = await answerOf(client, args);
    assert.equal(lost.outcome, 'unknown', JSON.stringify(lost));
    let settled = lost as { outcome: string; replayed?: boolean; result?: Invoice };
    for (let i = 0; i < 100 && settled.outcome !== 'succeeded'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      settled = await answerOf(client, args);
    }
    assert.equal(settled.outcome, 'succeeded', JSON.stringify(settled));
    assert.equal(settled.replayed, true);
    assert.deepEqual(settled.result, invoices.byKey.get(`acme/${args.idempotency_key}`));
    assert.equal(invoices.byKey.size, 1, 'the retry filed a second invoice');
  } finally {
    await client.close();
    await server.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = await startInvoiceServer();
  try {
    for (const era of Object.keys(ERAS) as (keyof typeof ERAS)[]) {
      await checkRetryReplays(server, era);
      console.log(`passed: a ${era} client's retry replays the first invoice`);
    }
    await checkContract(server);
    console.log('passed: undeclared and invalid arguments, and a caller without a tenant, are refused; nothing runs');
    await checkUnknownSettles();
    console.log('passed: a lost outcome is settled by the reconciler; the retry gets the filed invoice');
  } finally {
    await server.stop();
  }
}
