import { afterAll, beforeAll, expect, it } from 'vitest';
import { contract, newKey, sdkClient, startEverythingGateway, type EverythingGateway } from './support';

/**
 * What a call costs upstream (issue 46): one `tools/call` and nothing else. The connection (its `initialize`) and
 * the tool list read at start are kept across calls and across tenants that share a credential; a replay sends
 * nothing. Counted by the HTTP relay in front of @modelcontextprotocol/server-everything (streamable HTTP, from the
 * registry), which records every JSON-RPC request it forwards.
 */
const policy = { tools: { echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000 } } };

let setup: EverythingGateway;

beforeAll(async () => {
  // One credential for every tenant: the upstream sees the gateway, so one connection serves them all.
  setup = await startEverythingGateway({
    policy,
    credentials: { tenants: { '*': { header: { name: 'Authorization', value: 'Bearer gateway-credential' } } } },
  });
});
afterAll(async () => {
  await setup?.stop();
});

it('one tools/call per first call, none per replay; initialize and tools/list once, across calls and tenants', async () => {
  const { relay, gateway } = setup;
  const clients = [await sdkClient(gateway, 'demo'), await sdkClient(gateway, 'other')];
  try {
    const atStart = [...relay.methods];
    expect(atStart.filter((method) => method === 'tools/call')).toEqual([]);
    const calls = clients.flatMap((client) =>
      Array.from({ length: 5 }, () => ({ client, args: { message: `hello ${newKey()}`, idempotency_key: newKey() } })),
    );
    for (const { client, args } of calls)
      expect(contract(await client.callTool({ name: 'echo', arguments: args })).outcome).toBe('succeeded');
    for (const { client, args } of calls)
      expect(contract(await client.callTool({ name: 'echo', arguments: args }))).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(relay.methods.slice(atStart.length)).toEqual(Array(calls.length).fill('tools/call'));
    expect(relay.methods.filter((method) => method === 'initialize')).toHaveLength(1);
    expect(relay.methods.filter((method) => method === 'tools/list')).toHaveLength(1);
  } finally {
    for (const client of clients) await client.close();
  }
});
