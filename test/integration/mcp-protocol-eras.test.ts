import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { tools as registry } from '../../reference/tools';
import { newKey } from '../support/engine';
import { FixtureTool, fixturePaymentArgs, startFixtureStack, tableItemsNaming, type FixtureStack } from '../support/fixture-tools';
import { issueOperationId } from '../support/side-effects';
import { callWrite, connectClient, connectModernClient, keyHeaders, ledger, MODERN_PROTOCOL, orderArgs } from '../support/mcp';

/**
 * One endpoint, both protocol eras: what each generation of client gets over real HTTP. The calls run the fixture
 * tools, counted in the fixture downstream and the table; the two tests named after create_order list and call
 * the reference endpoint's tools (served beside them), whose orders are counted in the table.
 */
let stack: FixtureStack;
let token: string;
const TENANT = 'tenant-eras';
/** What the endpoint (it runs in this process) warned or wrote to stderr from its start on. */
const stderrLines: string[] = [];
const writeStderr = process.stderr.write.bind(process.stderr);

beforeAll(async () => {
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    stderrLines.push(String(chunk));
    return writeStderr(chunk, ...rest);
  }) as typeof process.stderr.write;
  for (const level of ['warn', 'error'] as const) {
    const original = console[level].bind(console);
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      stderrLines.push(args.map(String).join(' '));
      original(...args);
    });
  }
  // startFixtureStack opts fixture_payment out of server-side confirmation for 2025-era clients.
  // No background workers: nothing here queues an event or leaves a call to settle.
  stack = await startFixtureStack({ tools: registry, workers: { reconcilerTimer: false, relayPoller: false, consumerPoller: false } });
  token = await stack.tokenFor(TENANT);
});
afterAll(async () => {
  process.stderr.write = writeStderr;
  vi.restoreAllMocks();
  await stack?.stop();
});

type Order = { order_id: string };

async function listAndOrderTwice(client: Parameters<typeof callWrite>[0] & { listTools(): Promise<{ tools: Array<{ name: string }> }> }) {
  const { tools } = await client.listTools();
  expect(tools.map((tool) => tool.name)).toEqual(
    expect.arrayContaining(['create_order', 'request_payment', 'get_operation_status', FixtureTool.write, FixtureTool.payment]),
  );
  const key = newKey();
  const first = await callWrite<Order>(client, 'create_order', orderArgs(key));
  expect(first).toMatchObject({ outcome: 'succeeded', replayed: false });
  const second = await callWrite<Order>(client, 'create_order', orderArgs(key));
  expect(second).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.result });
  expect((await ledger(stack)).orders.filter((order) => order.idempotency_key === key)).toHaveLength(1);
}

/** A fixture write tool called twice with one key: the second call replays the first; one booking, one record. */
async function writeTwice(client: Parameters<typeof callWrite>[0]) {
  const key = newKey();
  const args = { idempotency_key: key, note: 'twice' };
  const first = await callWrite<{ booking_id: string }>(client, FixtureTool.write, args);
  expect(first).toMatchObject({ outcome: 'succeeded', replayed: false });
  const second = await callWrite(client, FixtureTool.write, args);
  expect(second).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.result });
  expect(stack.downstream.calls(key)).toBe(1);
  expect(stack.downstream.bookings(key)).toEqual([expect.objectContaining({ tenant: TENANT, booking_id: first.result!.booking_id })]);
  expect(await tableItemsNaming(stack, key)).toEqual([expect.objectContaining({ status: 'SUCCEEDED' })]);
}

const rawPost = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${token}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });

const modernMeta = { 'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL, 'io.modelcontextprotocol/clientCapabilities': {} };

describe('a 2026-07-28 client (SDK v2, pinned)', () => {
  it('lists the tools and calls create_order twice with one key: the second call is replayed', async () => {
    const client = await connectModernClient(stack, TENANT);
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe(MODERN_PROTOCOL);
      expect(client.getProtocolEra()).toBe('modern');
      await listAndOrderTwice(client);
    } finally {
      await client.close();
    }
  });

  it('calls a write tool twice with one key: the second call is replayed, one booking at the downstream, one record', async () => {
    const client = await connectModernClient(stack, TENANT);
    try {
      await writeTwice(client);
    } finally {
      await client.close();
    }
  });

  it('server/discover answers the modern version, the capabilities that are true, and a cache hint, in JSON', async () => {
    const response = await rawPost(
      { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: modernMeta } },
      { 'Mcp-Method': 'server/discover', 'Mcp-Protocol-Version': MODERN_PROTOCOL },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const { result } = (await response.json()) as { result: Record<string, unknown> };
    expect(result).toMatchObject({
      supportedVersions: [MODERN_PROTOCOL],
      capabilities: { tools: { listChanged: false } },
      resultType: 'complete',
      ttlMs: expect.any(Number),
      cacheScope: 'private',
    });
    expect(result.ttlMs).toBeGreaterThan(0);
  });

  it('tools/list carries resultType and a cache hint; an invalid cursor is -32602', async () => {
    const headers = { 'Mcp-Method': 'tools/list', 'Mcp-Protocol-Version': MODERN_PROTOCOL };
    const listed = (await (
      await rawPost({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: modernMeta } }, headers)
    ).json()) as {
      result: Record<string, unknown>;
    };
    expect(listed.result).toMatchObject({ resultType: 'complete', cacheScope: 'private', tools: expect.any(Array) });
    expect(listed.result.ttlMs).toBeGreaterThan(0);
    expect(listed.result).not.toHaveProperty('nextCursor');

    const paged = await rawPost(
      { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { cursor: 'not-ours', _meta: modernMeta } },
      headers,
    );
    expect(((await paged.json()) as { error: { code: number } }).error.code).toBe(-32602);
  });

  it('a tools/call is answered in plain JSON, and nothing warns about modes the operator cannot act on', async () => {
    const args = { idempotency_key: newKey(), note: 'plain JSON' };
    const response = await rawPost(
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: FixtureTool.write, arguments: args, _meta: modernMeta } },
      { 'Mcp-Method': 'tools/call', 'Mcp-Name': FixtureTool.write, 'Mcp-Protocol-Version': MODERN_PROTOCOL, ...keyHeaders(args) },
    );
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await response.json()) as { result: { structuredContent: { outcome: string } } }).result.structuredContent.outcome).toBe(
      'succeeded',
    );
    expect(stack.downstream.bookings(args.idempotency_key)).toHaveLength(1);
    expect(stderrLines.filter((line) => line.includes('responseMode'))).toEqual([]);
  });

  it('a browser client may send the 2026-07-28 headers (CORS preflight allows Mcp-Method and Mcp-Name)', async () => {
    const response = await fetch(stack.mcpUrl, {
      method: 'OPTIONS',
      headers: {
        Origin: 'http://localhost:6274',
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'mcp-method,mcp-name',
      },
    });
    const allowed = (response.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    expect(allowed).toEqual(expect.arrayContaining(['mcp-method', 'mcp-name']));
  });
});

describe('2025-era clients', () => {
  it('a 1.x SDK client (2025-11-25) lists the tools and calls create_order twice: the second call is replayed', async () => {
    const client = await connectClient(stack, TENANT);
    try {
      await listAndOrderTwice(client);
    } finally {
      await client.close();
    }
  });

  it('a 1.x SDK client calls a write tool twice with one key: the second call is replayed, one booking, one record', async () => {
    const client = await connectClient(stack, TENANT);
    try {
      await writeTwice(client);
    } finally {
      await client.close();
    }
  });

  it('where the deployment lets 2025-era clients confirm on their side (the opt-out), a 1.x client pays', async () => {
    const client = await connectClient(stack, TENANT);
    try {
      const operationId = await issueOperationId(client, FixtureTool.payment);
      expect(await callWrite(client, FixtureTool.payment, fixturePaymentArgs(operationId))).toMatchObject({
        outcome: 'succeeded',
        replayed: false,
      });
      expect(stack.downstream.bookings(operationId)).toEqual([expect.objectContaining({ tenant: TENANT, kind: 'payment' })]);
    } finally {
      await client.close();
    }
  });

  it('2025-06-18 requests get plain JSON answers without the 2026-07-28 fields', async () => {
    const headers = { 'Mcp-Protocol-Version': '2025-06-18' };
    const init = await rawPost({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old', version: '1' } },
    });
    expect(init.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await init.json()) as { result: { protocolVersion: string } }).result.protocolVersion).toBe('2025-06-18');

    const listed = await rawPost({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
    expect(listed.headers.get('content-type')).toMatch(/^application\/json/);
    const { result } = (await listed.json()) as { result: Record<string, unknown> };
    expect(result).not.toHaveProperty('resultType');
    expect(result).not.toHaveProperty('ttlMs');

    const paged = await rawPost({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: { cursor: 'not-ours' } }, headers);
    expect(((await paged.json()) as { error: { code: number } }).error.code).toBe(-32602);
  });
});
