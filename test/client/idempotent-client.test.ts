import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprint } from '../../lambdas/core/fingerprint';
import { CallLedger } from '../../client/call-ledger';
import { createFaultFetch } from '../../client/fault-fetch';
import { IdempotentMcpClient, type IdempotentClientOptions } from '../../client/idempotent-client';
import { LIKELY_REPLAY_META_KEY } from '../../lambdas/core/replay-hint';
import { freePort } from '../../local/free-port';
import { startLocalStack, type LocalStack } from '../../local/stack';
import { decideAsLocalPerson } from '../../scripts/local-approver';
import { startSecretsManager } from '../support/secrets-manager';
import { startFaultProxy, type FaultProxy } from './support/fault-proxy';

let stack: LocalStack;
let token: string;
let proxy: FaultProxy;
let dir: string;
const clients: IdempotentMcpClient[] = [];

beforeAll(async () => {
  stack = await startLocalStack();
  token = await stack.tokenFor('client-tests');
  proxy = await startFaultProxy(stack.mcpUrl);
  dir = await mkdtemp(join(tmpdir(), 'client-ledger-'));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await proxy?.stop();
  await stack?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A client whose waits are recorded instead of slept, on a clock that the waits advance. */
function testClient(overrides: Partial<IdempotentClientOptions> = {}) {
  const sleeps: number[] = [];
  let now = Date.now();
  const client = new IdempotentMcpClient({
    url: stack.mcpUrl,
    token,
    session: 'session-1',
    random: () => 0.5,
    // The person approves every payment on the approval page (signed in at the local dev issuer).
    onApprovalLink: (link) => decideAsLocalPerson(link.url, { tenant: 'client-tests', decision: 'approve' }),
    clock: () => now,
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
    ...overrides,
  });
  clients.push(client);
  return { client, sleeps };
}

/** Counts the requests a client sends (connections refused included). */
function countingFetch(): { fetch: FetchLike; count: () => number } {
  let count = 0;
  return {
    fetch: (url, init) => {
      count++;
      return fetch(url, init);
    },
    count: () => count,
  };
}

let orderNumber = 0;
const orderArgs = (extra: Record<string, unknown> = {}) => ({
  customer_id: `customer-${++orderNumber}`,
  items: [{ sku: 'sku-1', quantity: 2 }],
  currency: 'EUR',
  ...extra,
});

async function ordersWithKey(key: string): Promise<unknown[]> {
  const ledger = (await (await fetch(`${stack.url}/sandbox/ledger`)).json()) as { orders: { idempotency_key: string }[] };
  return ledger.orders.filter((order) => order.idempotency_key === key);
}

describe('lost answers', () => {
  it('retries with the same key and gets the replay; one order exists', async () => {
    const faults = createFaultFetch();
    faults.inject({ tool: 'create_order', fault: { mode: 'lose-response' }, times: 1 });
    const { client, sleeps } = testClient({ fetch: faults.fetch });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 2, result: { outcome: 'succeeded', replayed: true } });
    expect(faults.callsTo('create_order')).toBe(2);
    expect(sleeps).toHaveLength(1);
    expect(call.status).toMatch(/^create_order ik_.+ : succeeded \(replayed\), order_id .+ \[2 attempts\]$/);
    expect(await ordersWithKey(call.key)).toHaveLength(1);
  });

  it('also when a real socket is cut after the server answered', async () => {
    proxy.inject('create_order', { mode: 'reset-after' }, 2);
    const before = proxy.callsTo('create_order');
    const { client } = testClient({ url: proxy.url });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 3, result: { replayed: true } });
    expect(proxy.callsTo('create_order') - before).toBe(3);
    expect(await ordersWithKey(call.key)).toHaveLength(1);
  });
});

describe('transport errors', () => {
  it('retries resets, 503 and 429 with the same key, waiting at least the Retry-After', async () => {
    proxy.inject('create_order', { mode: 'reset-before' }, 1);
    proxy.inject('create_order', { mode: 'status', status: 503 }, 1);
    proxy.inject('create_order', { mode: 'status', status: 429, retryAfterSeconds: 7 }, 1);
    const { client, sleeps } = testClient({ url: proxy.url });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 4, result: { outcome: 'succeeded', replayed: false } });
    // Full jitter at random() = 0.5 under ceilings 200, 400, 800 ms; the 429's Retry-After (7 s) is a floor.
    expect(sleeps).toEqual([100, 200, 7000]);
    expect(await ordersWithKey(call.key)).toHaveLength(1);
  });

  it('retries a refused connection and reports the intent as not sent when the budget runs out', async () => {
    const port = await freePort(); // nothing listens there
    const counter = countingFetch();
    const { client, sleeps } = testClient({ url: `http://127.0.0.1:${port}/mcp`, fetch: counter.fetch, retry: { maxAttempts: 3 } });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(counter.count()).toBe(3);
    expect(sleeps).toHaveLength(2);
    // It could not even learn which key the tool takes (tools/list): no key was minted, and nothing was sent.
    expect(call).toMatchObject({ state: 'submitted', key: '', attempts: 3, failure: { kind: 'transport' } });
    expect(call.status).toMatch(/: not sent \(network error ECONNREFUSED\); call again later \[3 attempts\]$/);
    expect(client.ledger.entries()).toEqual([]);
  });
});

describe('the retry budget', () => {
  it('stops at maxAttempts, leaving an intent that may have run as unknown', async () => {
    proxy.inject('create_order', { mode: 'status', status: 502 }, 100);
    const before = proxy.callsTo('create_order');
    const { client, sleeps } = testClient({ url: proxy.url, retry: { maxAttempts: 4 } });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });
    proxy.clear();

    expect(proxy.callsTo('create_order') - before).toBe(4);
    expect(sleeps).toHaveLength(3);
    expect(call).toMatchObject({ state: 'unknown', attempts: 4, failure: { kind: 'transport', httpStatus: 502 } });
    expect(client.ledger.entries().find((e) => e.key === call.key)).toMatchObject({ state: 'unknown', attempts: 4 });
  });

  it('does not start a wait that would cross maxElapsedMs', async () => {
    const faults = createFaultFetch();
    faults.inject({ tool: 'create_order', fault: { mode: 'status', status: 503 }, times: 100 });
    // random() just under 1: waits of 99, 199, 399, 799 ms; the fourth would end past 1000 ms.
    const { client, sleeps } = testClient({
      fetch: faults.fetch,
      random: () => 0.999,
      retry: { maxAttempts: 100, maxElapsedMs: 1000, baseDelayMs: 100, maxDelayMs: 10_000 },
    });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(sleeps).toEqual([99, 199, 399]);
    expect(faults.callsTo('create_order')).toBe(4);
    expect(call.attempts).toBe(4);
  });
});

describe('deterministic errors return at once', () => {
  it('rejected arguments', async () => {
    const faults = createFaultFetch();
    const { client, sleeps } = testClient({ fetch: faults.fetch });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs({ currency: 'euro' }) });

    expect(call).toMatchObject({ state: 'failed', attempts: 1, result: { outcome: 'rejected', retryable: false, error: { code: 'INVALID_ARGUMENTS' } } });
    expect(faults.callsTo('create_order')).toBe(1);
    expect(sleeps).toEqual([]);
  });

  it('conflict: the same named intent re-planned with other arguments', async () => {
    const { client, sleeps } = testClient();
    const first = await client.callWrite({ tool: 'create_order', intent: 'order-for-conflict', args: orderArgs() });
    const second = await client.callWrite({ tool: 'create_order', intent: 'order-for-conflict', args: orderArgs() });

    expect(first.state).toBe('succeeded');
    expect(second).toMatchObject({ key: first.key, state: 'failed', attempts: 1, result: { outcome: 'conflict' } });
    expect(sleeps).toEqual([]);
    expect(await ordersWithKey(first.key)).toHaveLength(1);
  });

  it('HTTP 401', async () => {
    const counter = countingFetch();
    const { client, sleeps } = testClient({ token: 'not-a-token', fetch: counter.fetch });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(call).toMatchObject({ state: 'failed', attempts: 1, failure: { kind: 'deterministic', httpStatus: 401 } });
    expect(counter.count()).toBe(1);
    expect(sleeps).toEqual([]);
  });

  it('a JSON-RPC error (a tool the server does not have)', async () => {
    const faults = createFaultFetch();
    const { client } = testClient({ fetch: faults.fetch });

    const call = await client.callWrite({ tool: 'no_such_tool', args: { a: 1 } });

    expect(call.state).toBe('failed');
    expect(call.attempts).toBe(1);
    expect(faults.callsTo('no_such_tool')).toBe(1);
  });
});

describe('one key per intent', () => {
  it('a re-planned intent (same business arguments, any order, new trace id) gets the same key and the replay', async () => {
    const { client } = testClient();
    const args = orderArgs({ trace_id: 'trace-1' });
    const first = await client.callWrite({ tool: 'create_order', args });
    const replanned = await client.callWrite({
      tool: 'create_order',
      args: { currency: args.currency, items: args.items, customer_id: args.customer_id, trace_id: 'trace-2', idempotency_key: 'model-made-up-key' },
    });

    expect(first).toMatchObject({ newIntent: true, result: { replayed: false } });
    expect(replanned).toMatchObject({ key: first.key, newIntent: false, state: 'succeeded', result: { replayed: true } });
    expect(replanned.result?.result).toEqual(first.result?.result);
    expect(await ordersWithKey(first.key)).toHaveLength(1);
  });

  it('a new intent gets a new key: other arguments, another intent name, another session', async () => {
    const args = orderArgs();
    const { client } = testClient();
    const { client: otherSession } = testClient({ session: 'session-2' });
    const calls = [
      await client.callWrite({ tool: 'create_order', args }),
      await client.callWrite({ tool: 'create_order', args: { ...args, items: [{ sku: 'sku-1', quantity: 3 }] } }),
      await client.callWrite({ tool: 'create_order', args, intent: 'second order, same contents' }),
      await otherSession.callWrite({ tool: 'create_order', args }),
    ];

    expect(new Set(calls.map((c) => c.key)).size).toBe(4);
    for (const call of calls) expect(call).toMatchObject({ newIntent: true, result: { outcome: 'succeeded', replayed: false } });
  });

  it('concurrent duplicates of one intent send one key and make one order', async () => {
    const { client } = testClient();
    const args = orderArgs();
    const calls = await Promise.all(Array.from({ length: 8 }, () => client.callWrite({ tool: 'create_order', args })));

    expect(new Set(calls.map((c) => c.key)).size).toBe(1);
    expect(calls.filter((c) => c.result?.replayed === false)).toHaveLength(1);
    expect(await ordersWithKey(calls[0]!.key)).toHaveLength(1);
  });
});

/** The `_meta` of every `tools/call` the client sends, in order, as the server receives it. */
function metaRecordingFetch(base: FetchLike = (url, init) => fetch(url, init)) {
  const calls: { tool: string; meta: Record<string, unknown> }[] = [];
  const recording: FetchLike = (url, init) => {
    if (typeof init?.body === 'string') {
      const message = JSON.parse(init.body) as { method?: string; params?: { name?: string; _meta?: Record<string, unknown> } };
      if (message.method === 'tools/call') calls.push({ tool: String(message.params?.name), meta: message.params?._meta ?? {} });
    }
    return base(url, init);
  };
  return { fetch: recording, hints: (tool: string) => calls.filter((c) => c.tool === tool).map((c) => c.meta[LIKELY_REPLAY_META_KEY] === true), calls };
}

describe('the replay hint (a key sent again says so in _meta)', () => {
  it.each(['auto', 'legacy'] as const)('is on the retry after a lost answer, never on the first send (protocolEra %s)', async (protocolEra) => {
    const faults = createFaultFetch();
    faults.inject({ tool: 'create_order', fault: { mode: 'lose-response' }, times: 1 });
    const recorder = metaRecordingFetch(faults.fetch);
    const { client } = testClient({ fetch: recorder.fetch, protocolEra });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 2, result: { replayed: true } });
    expect(recorder.hints('create_order')).toEqual([false, true]);
    // On 2026-07-28 the hint rides next to the protocol's own envelope keys.
    const envelope = recorder.calls.at(-1)!.meta['io.modelcontextprotocol/protocolVersion'];
    expect(envelope).toBe(protocolEra === 'auto' ? '2026-07-28' : undefined);
    expect(await ordersWithKey(call.key)).toHaveLength(1);
  });

  it('is on a re-planned call of a sent intent, and not on a new intent', async () => {
    const recorder = metaRecordingFetch();
    const { client } = testClient({ fetch: recorder.fetch });
    const args = orderArgs();
    const first = await client.callWrite({ tool: 'create_order', args });
    const again = await client.callWrite({ tool: 'create_order', args });
    const other = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect([first.result?.replayed, again.result?.replayed, other.result?.replayed]).toEqual([false, true, false]);
    expect(recorder.hints('create_order')).toEqual([false, true, false]);
  });

  it('is not on the first send after attempts that never left the machine (connection refused)', async () => {
    const faults = createFaultFetch();
    // Every POST refused: the connection (server/discover or initialize) never opens, so nothing is sent.
    faults.inject({ fault: { mode: 'refuse' }, times: 2 });
    const recorder = metaRecordingFetch(faults.fetch);
    const { client } = testClient({ fetch: recorder.fetch, operationIdTools: [] });

    const call = await client.callWrite({ tool: 'create_order', args: orderArgs() });

    expect(call).toMatchObject({ state: 'succeeded', result: { replayed: false } });
    // Told the operation-id tools, the client lists nothing, so the SDK's first 2026-07-28 send carries no
    // Mcp-Param header: the server refuses it (400 / -32020, nothing ran) and the SDK lists the tools and sends again.
    // No send of this call is a retry of one that may have run.
    const hints = recorder.hints('create_order');
    expect(hints.length).toBeGreaterThanOrEqual(1);
    expect(hints).not.toContain(true);
    expect(await ordersWithKey(call.key)).toHaveLength(1);
  });
});

describe('operation ids', () => {
  it("are used for the tools the server lists as taking one (an input schema requiring operation_id), and no tool name is built in", async () => {
    const args = { amount_minor: 410, currency: 'EUR', payee_id: `payee-${++orderNumber}` };
    const learnt = await testClient().client.callWrite({ tool: 'request_payment', args });
    expect(learnt).toMatchObject({ keyKind: 'operation_id', state: 'succeeded', key: expect.stringMatching(/^op_/) });
    const order = await testClient().client.callWrite({ tool: 'create_order', args: orderArgs() });
    expect(order).toMatchObject({ keyKind: 'idempotency_key', state: 'succeeded' });
    // Told otherwise, the client believes it: the server then refuses the client key, and nothing is paid.
    const told = await testClient({ operationIdTools: [] }).client.callWrite({ tool: 'request_payment', args: { ...args, amount_minor: 411 } });
    expect(told).toMatchObject({ keyKind: 'idempotency_key', state: 'failed', result: { outcome: 'rejected' } });
  });

  it('are issued once per intent and reused on every retry and re-plan', async () => {
    const faults = createFaultFetch();
    // The answer of the round that pays (the one carrying the person's yes) is lost.
    faults.inject({ tool: 'request_payment', answered: true, fault: { mode: 'lose-response' }, times: 1 });
    const { client } = testClient({ fetch: faults.fetch });
    const args = { amount_minor: 1250, currency: 'EUR', payee_id: `payee-${++orderNumber}` };

    const first = await client.callWrite({ tool: 'request_payment', args });
    const replanned = await client.callWrite({ tool: 'request_payment', args: { ...args, trace_id: 'trace-2' } });
    const newIntent = await client.callWrite({ tool: 'request_payment', args: { ...args, amount_minor: 1300 } });

    expect(first).toMatchObject({ keyKind: 'operation_id', state: 'succeeded', attempts: 2, result: { replayed: true } });
    expect(replanned).toMatchObject({ key: first.key, newIntent: false, result: { replayed: true } });
    expect(newIntent.key).not.toBe(first.key);
    expect(faults.callsTo('issue_operation_id')).toBe(2);
    // Asked and answered, then one replay (the operation ran: not asked again), one replay, asked and answered.
    expect(faults.callsTo('request_payment')).toBe(6);
    const ledger = (await (await fetch(`${stack.url}/sandbox/ledger`)).json()) as { payments: { payee_id: string; amount_minor: number }[] };
    const payments = ledger.payments.filter((p) => p.payee_id === args.payee_id);
    expect(payments.map((p) => p.amount_minor).sort()).toEqual([1250, 1300]);
  });

  it('are asked for again while the server cannot read its key for a moment; the payment then runs once', async () => {
    // A server as deployed: the key by ARN, read from Secrets Manager (a stand-in here).
    const secretArn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:operation-ids';
    const secrets = await startSecretsManager({ [secretArn]: 'k'.repeat(48) });
    const deployedLike = await startLocalStack({
      env: {
        OPERATION_ID_SECRET: undefined,
        OPERATION_ID_SECRET_ARN: secretArn,
        SECRETS_MANAGER_ENDPOINT: secrets.endpoint,
      },
    });
    try {
      secrets.failNext = 2;
      const { client, sleeps } = testClient({ url: deployedLike.mcpUrl, token: await deployedLike.tokenFor('client-tests') });
      const args = { amount_minor: 700, currency: 'EUR', payee_id: `payee-${++orderNumber}` };

      const call = await client.callWrite({ tool: 'request_payment', args });

      expect(call).toMatchObject({ keyKind: 'operation_id', state: 'succeeded', result: { replayed: false } });
      expect(secrets.requests).toHaveLength(3);
      // Two waits while the key was unreadable (full jitter at random() = 0.5), then one while the person approved.
      expect(sleeps).toEqual([100, 200, 2000]);
      const ledger = (await (await fetch(`${deployedLike.url}/sandbox/ledger`)).json()) as { payments: { payee_id: string }[] };
      expect(ledger.payments.filter((p) => p.payee_id === args.payee_id)).toHaveLength(1);
    } finally {
      await deployedLike.stop();
      await secrets.stop();
    }
  });

  it('are replaced once when the server refuses an old one under which nothing ran (expired, or not ours)', async () => {
    const args = { amount_minor: 990, currency: 'EUR', payee_id: `payee-${++orderNumber}` };
    const ledger = new CallLedger();
    const stale = `op_1.${'a'.repeat(22)}.${'b'.repeat(43)}`;
    ledger.create({ session: 'session-1', tool: 'request_payment', fingerprint: fingerprint(args) }, stale, 'operation_id');
    const faults = createFaultFetch();
    const { client } = testClient({ fetch: faults.fetch, ledger });

    const call = await client.callWrite({ tool: 'request_payment', args });

    expect(call).toMatchObject({ newIntent: false, state: 'succeeded', attempts: 2, result: { replayed: false } });
    expect(call.key).not.toBe(stale);
    expect(faults.callsTo('issue_operation_id')).toBe(1);
    expect(ledger.entries().map((e) => e.key)).toEqual([call.key]);
  });
});

describe('ledger persistence', () => {
  it('a restarted agent keeps its keys: the same intent after a restart is a replay', async () => {
    const file = join(dir, 'agent-ledger.json');
    const args = orderArgs();
    // The first run's answer is lost and it has no budget left to retry: the intent is unknown when it stops.
    const faults = createFaultFetch();
    faults.inject({ tool: 'create_order', fault: { mode: 'lose-response' }, times: 1 });
    const { client: beforeRestart } = testClient({ fetch: faults.fetch, ledger: await CallLedger.open({ file }), retry: { maxAttempts: 1 } });
    const lost = await beforeRestart.callWrite({ tool: 'create_order', args });
    await beforeRestart.close();
    expect(lost).toMatchObject({ state: 'unknown', attempts: 1 });

    const { client: afterRestart } = testClient({ ledger: await CallLedger.open({ file }) });
    const again = await afterRestart.callWrite({ tool: 'create_order', args });

    expect(again).toMatchObject({ key: lost.key, newIntent: false, state: 'succeeded', attempts: 1, result: { replayed: true } });
    expect(await ordersWithKey(lost.key)).toHaveLength(1);
    expect(afterRestart.ledger.entries().find((e) => e.key === lost.key)).toMatchObject({ state: 'succeeded', attempts: 2 });
  });
});
