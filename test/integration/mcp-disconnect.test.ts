import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deferred, newKey } from '../support/engine';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient, keyHeaders, MODERN_PROTOCOL } from '../support/mcp';

/**
 * MCP 2026-07-28: a client disconnect on Streamable HTTP is a cancellation. For a write that already claimed its key,
 * hanging up must not leave the record PROCESSING nor undo anything: the execution finishes, and the next call with
 * the key gets the stored answer. Tested with a real socket closed mid-call, in both protocol eras, on fixture_write:
 * its downstream holds the call's request until the test releases it, and counts what it received and booked.
 */
let stack: FixtureStack;
let token: string;
const TENANT = 'tenant-hangup';
const TOOL = FixtureTool.write;

beforeAll(async () => {
  stack = await startFixtureStack();
  token = await stack.tokenFor(TENANT);
});
afterAll(() => stack?.stop());

const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'hangup', version: '1' },
};

/** POSTs a fixture_write call over a raw socket and resolves once the request is on the wire; `hangUp` destroys the socket. */
function startCall(key: string, era: 'modern' | 'legacy') {
  const url = new URL(stack.mcpUrl);
  const params = { name: TOOL, arguments: { idempotency_key: key, note: era }, ...(era === 'modern' ? { _meta: MODERN_META } : {}) };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params });
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${token}`,
    'Content-Length': String(Buffer.byteLength(body)),
    ...(era === 'modern'
      ? { 'Mcp-Method': 'tools/call', 'Mcp-Name': TOOL, 'Mcp-Protocol-Version': MODERN_PROTOCOL, ...keyHeaders(params.arguments) }
      : { 'Mcp-Protocol-Version': '2025-11-25' }),
  };
  const answered = deferred<void>();
  const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent: false }, () =>
    answered.resolve(),
  );
  // Destroyed on purpose below; nothing else may end this request.
  const closed = new Promise<Error | undefined>((resolve) => req.on('error', resolve).on('close', () => resolve(undefined)));
  req.end(body);
  return {
    answered: answered.promise,
    hangUp: async () => {
      req.destroy();
      await closed;
    },
  };
}

async function settled(key: string) {
  // The execution goes on after the hang-up: wait until its record has left PROCESSING.
  for (;;) {
    const record = await stack.services.store.get({ tenant: TENANT, tool: TOOL, idempotencyKey: key });
    if (record && record.status !== 'PROCESSING') return record;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(['modern', 'legacy'] as const)('a %s-era client hangs up mid-call', (era) => {
  it('the execution finishes, nothing is undone, and the next call with the key replays the stored answer', async () => {
    const key = newKey();
    const downstreamHolds = stack.downstream.hold(key);
    const call = startCall(key, era);
    await downstreamHolds.entered;
    let answeredBeforeHangUp = false;
    void call.answered.then(() => (answeredBeforeHangUp = true));
    await call.hangUp();
    downstreamHolds.release();

    // SUCCEEDED: the hang-up did not abort the execution's request (an aborted one would leave it UNKNOWN).
    const record = await settled(key);
    expect(answeredBeforeHangUp).toBe(false);
    expect(record.status).toBe('SUCCEEDED');
    const [booking] = stack.downstream.bookings(key);
    const client = await connectClient(stack, TENANT);
    try {
      const again = await callWrite(client, TOOL, { idempotency_key: key, note: era });
      expect(again).toMatchObject({ outcome: 'succeeded', replayed: true, result: { booking_id: booking!.booking_id, key } });
    } finally {
      await client.close();
    }
    // One request reached the downstream, and it holds one booking.
    expect(stack.downstream.calls(key)).toBe(1);
    expect(stack.downstream.bookings(key)).toHaveLength(1);
  });
});
