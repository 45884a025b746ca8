/**
 * What the example promises, checked against a running server: a client of either MCP era calls `create_invoice`
 * twice with one `idempotency_key` and gets one invoice; the retry replays the first result.
 * Run: DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npm test
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startInvoiceServer, type StartedServer } from './server.js';

const ERAS = { '2026-07-28': { mode: { pin: '2026-07-28' } }, '2025-11-25': { mode: 'legacy' } } as const;

export async function checkRetryReplays(server: StartedServer, era: keyof typeof ERAS): Promise<void> {
  const client = new Client({ name: 'example-test', version: '1' }, { versionNegotiation: ERAS[era] });
  const headers = { Authorization: `Bearer ${server.tokenFor('acme')}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((tool) => tool.name), ['create_invoice', 'get_operation_status']);
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

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = await startInvoiceServer();
  try {
    for (const era of Object.keys(ERAS) as (keyof typeof ERAS)[]) {
      await checkRetryReplays(server, era);
      console.log(`passed: a ${era} client's retry replays the first invoice`);
    }
  } finally {
    await server.stop();
  }
}
