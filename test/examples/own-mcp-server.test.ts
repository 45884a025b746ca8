import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { startInvoiceServer, type StartedServer } from '../../examples/own-mcp-server/server';

/** The example a team copies: its own McpServer, one write tool through registerWriteTool, DynamoDB Local. */
let server: StartedServer;
beforeAll(async () => {
  server = await startInvoiceServer({ dynamodbEndpoint: inject('dynamodbEndpoint') });
});
afterAll(() => server?.stop());

it.each([
  ['2026-07-28', { mode: { pin: '2026-07-28' } } as const],
  ['2025-11-25', { mode: 'legacy' } as const],
])('a %s client creates one invoice per key: the retry replays it', async (_era, versionNegotiation) => {
  const client = new Client({ name: 'example-test', version: '1' }, { versionNegotiation });
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: { Authorization: `Bearer ${server.tokenFor('acme')}` } } }));
  try {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['create_invoice']);
    const args = { idempotency_key: `inv-${Math.random().toString(36).slice(2)}-key`, customer: 'c-1', amount_minor: 4200 };
    const first = (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as Record<string, unknown>;
    const again = (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as Record<string, unknown>;
    expect(first).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(again).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.result });
    const invoices = [...server.services.invoices.values()].filter((invoice) => invoice.invoice_id === (first.result as { invoice_id: string }).invoice_id);
    expect(invoices).toHaveLength(1);
  } finally {
    await client.close();
  }
});
