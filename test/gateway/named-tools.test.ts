import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contract, newKey, relayedCalls, ROOT, scratch, sdkClient, startTestGateway, type TestGateway } from './support';

/**
 * The gateway in front of a small SDK server of the test's own (stdio) whose tools are named like Object.prototype's
 * members and whose writes carry their own key arguments. What the upstream received is read from its own log.
 */
const PROTOTYPE_NAMES = ['toString', 'constructor', 'valueOf', 'hasOwnProperty', '__proto__', 'isPrototypeOf'];
// JSON.parse, as the command reads the file: "__proto__" is then a key like any other.
const policy = JSON.parse(
  JSON.stringify({
    tools: {
      valueOf: { kind: 'read' },
      book: { kind: 'write', key: { argument: 'idempotency_key' }, inFlightWindowMs: 0 },
      trace: { kind: 'write', key: { argument: 'trace_id' }, inFlightWindowMs: 0 },
      order: { kind: 'write', key: { argument: 'ref' }, inFlightWindowMs: 0 },
    },
  }),
);

let gateway: TestGateway;
let client: Client;
let log: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await scratch('named'));
  log = join(dir, 'calls.jsonl');
  gateway = await startTestGateway({
    policy: { ...policy, env: { CALL_LOG: log } },
    argv: ['--', process.execPath, join(ROOT, 'test', 'gateway', 'named-tools-server.mjs')],
  });
  client = await sdkClient(gateway);
});
afterAll(async () => {
  await client?.close();
  await gateway?.stop();
  await cleanup?.();
});

const received = (name: string) => relayedCalls(log).filter((call) => call.name === name);

describe('only the tools the policy names exist', () => {
  it('an upstream tool named like an Object.prototype member is served only when the policy names it', async () => {
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    expect(listed.filter((name) => PROTOTYPE_NAMES.includes(name))).toEqual(['valueOf']);
    expect([...gateway.gateway.hidden].sort()).toEqual(PROTOTYPE_NAMES.filter((name) => name !== 'valueOf').sort());
    for (const name of PROTOTYPE_NAMES.filter((name) => name !== 'valueOf')) {
      const answer = await client
        .callTool({ name, arguments: {} })
        .catch((err: Error) => ({ isError: true, content: [{ type: 'text', text: err.message }] }));
      expect(answer.isError).toBe(true);
    }
    expect(PROTOTYPE_NAMES.flatMap(received).map((call) => call.name)).toEqual([]);
    expect((await client.callTool({ name: 'valueOf', arguments: {} })).isError).toBeFalsy();
    expect(received('valueOf')).toHaveLength(1);
  });
});

describe('a key the upstream defines is sent as is', () => {
  it('idempotency_key and trace_id named as the key reach the upstream unchanged, once per key', async () => {
    const key = newKey();
    for (let i = 0; i < 2; i++)
      expect(contract(await client.callTool({ name: 'book', arguments: { idempotency_key: key, what: 'room' } })).outcome).toBe(
        'succeeded',
      );
    expect(received('book').filter((call) => call.arguments.idempotency_key === key)).toEqual([
      { name: 'book', arguments: { idempotency_key: key, what: 'room' } },
    ]);
    const trace = `trace ${newKey()} with spaces`.replace(/ /g, '-');
    expect(contract(await client.callTool({ name: 'trace', arguments: { trace_id: trace, what: 'x' } })).outcome).toBe('succeeded');
    expect(received('trace').filter((call) => call.arguments.trace_id === trace)).toEqual([
      { name: 'trace', arguments: { trace_id: trace, what: 'x' } },
    ]);
  });

  it('a key that breaks the key rules is sent as is, and never shares a record with its digest given as is', async () => {
    const odd = `order ${newKey()} / 2026`;
    expect(contract(await client.callTool({ name: 'order', arguments: { ref: odd, what: 'one' } })).outcome).toBe('succeeded');
    const { createHash } = await import('node:crypto');
    const digest = `sha256:${createHash('sha256').update(odd).digest('hex')}`;
    expect(contract(await client.callTool({ name: 'order', arguments: { ref: digest, what: 'two' } })).outcome).toBe('succeeded');
    expect(
      received('order')
        .filter((call) => [odd, digest].includes(call.arguments.ref as string))
        .map((call) => call.arguments),
    ).toEqual([
      { ref: odd, what: 'one' },
      { ref: digest, what: 'two' },
    ]);
  });
});
