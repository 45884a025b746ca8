import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import type { LocalStack } from '../../local/stack';
import { defineWriteTool } from '../../lambdas/mcp/define-write-tool';
import { tools as registry } from '../../reference/tools';
import { deferred, newKey } from '../support/engine';
import { callWrite, connectClient, keyHeaders, MODERN_PROTOCOL, startTestStack } from '../support/mcp';

/**
 * MCP 2026-07-28: a client disconnect on Streamable HTTP is a cancellation. For a write that already claimed its key,
 * hanging up must not leave the record PROCESSING nor undo anything: the execution finishes, and the next call with
 * the key gets the stored answer. Tested with a real socket closed mid-call, in both protocol eras.
 */
let stack: LocalStack;
let token: string;
const TENANT = 'tenant-hangup';
const held = new Map<string, { entered: ReturnType<typeof deferred<void>>; release: ReturnType<typeof deferred<void>> }>();
const runs = new Map<string, number>();
const hold = (key: string) => {
  let gate = held.get(key);
  if (!gate) held.set(key, (gate = { entered: deferred<void>(), release: deferred<void>() }));
  return gate;
};

/** Holds mid-execution until released, then reports whether its own deadline signal was fired. */
const heldWrite = defineWriteTool({
  name: 'held_write',
  title: 'Held write',
  description: 'Test tool: holds until the test releases it.',
  input: { note: z.string().max(32) },
  result: z.object({ note: z.string(), cancelled_mid_flight: z.boolean() }),
  annotations: { destructiveHint: false, openWorldHint: false },
  async execute(args, ctx) {
    runs.set(ctx.idempotencyKey, (runs.get(ctx.idempotencyKey) ?? 0) + 1);
    const gate = hold(ctx.idempotencyKey);
    gate.entered.resolve();
    await gate.release.promise;
    return { result: { note: args.note, cancelled_mid_flight: ctx.signal.aborted } };
  },
});

beforeAll(async () => {
  stack = await startTestStack({ tools: [...registry, heldWrite] });
  token = await stack.tokenFor(TENANT);
});
afterAll(() => stack?.stop());

const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'hangup', version: '1' },
};

/** POSTs a held_write call over a raw socket and resolves once the request is on the wire; `hangUp` destroys the socket. */
function startCall(key: string, era: 'modern' | 'legacy') {
  const url = new URL(stack.mcpUrl);
  const params = { name: 'held_write', arguments: { idempotency_key: key, note: era }, ...(era === 'modern' ? { _meta: MODERN_META } : {}) };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params });
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${token}`,
    'Content-Length': String(Buffer.byteLength(body)),
    ...(era === 'modern'
      ? { 'Mcp-Method': 'tools/call', 'Mcp-Name': 'held_write', 'Mcp-Protocol-Version': MODERN_PROTOCOL, ...keyHeaders(params.arguments) }
      : { 'Mcp-Protocol-Version': '2025-11-25' }),
  };
  const answered = deferred<void>();
  const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent: false }, () => answered.resolve());
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
    const record = await stack.services.store.get({ tenant: TENANT, tool: 'held_write', idempotencyKey: key });
    if (record && record.status !== 'PROCESSING') return record;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(['modern', 'legacy'] as const)('a %s-era client hangs up mid-call', (era) => {
  it('the execution finishes, nothing is undone, and the next call with the key replays the stored answer', async () => {
    const key = newKey();
    const call = startCall(key, era);
    await hold(key).entered.promise;
    let answeredBeforeHangUp = false;
    void call.answered.then(() => (answeredBeforeHangUp = true));
    await call.hangUp();
    hold(key).release.resolve();

    const record = await settled(key);
    expect(answeredBeforeHangUp).toBe(false);
    expect(record.status).toBe('SUCCEEDED');
    const client = await connectClient(stack, TENANT);
    try {
      const again = await callWrite(client, 'held_write', { idempotency_key: key, note: era });
      expect(again).toMatchObject({ outcome: 'succeeded', replayed: true, result: { note: era, cancelled_mid_flight: false } });
    } finally {
      await client.close();
    }
    expect(runs.get(key)).toBe(1);
  });
});
