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
import { freePort } from '../../lambdas/local/free-port';
import { decideAsLocalPerson } from '../../scripts/local-approver';
import { FixtureTool, fixtureOrder, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { startSecretsManager } from '../support/secrets-manager';
import { startFaultProxy, type FaultProxy } from './support/fault-proxy';

/**
 * The retry-safe client against the local stack serving the toolkit's fixture tools: fixture_write books at the
 * fixture downstream under the client's idempotency_key, fixture_order commits its order with the record, and
 * fixture_payment takes a server-issued operation id and the person's approval. What ran is counted where it landed
 * (the requests and bookings of the downstream, the order in the table), never from the client's own answers.
 */
const TENANT = 'client-tests';
const WRITE = FixtureTool.write;
const ORDER = FixtureTool.order;
const PAY = FixtureTool.payment;
let stack: FixtureStack;
let token: string;
let proxy: FaultProxy;
let dir: string;
const clients: IdempotentMcpClient[] = [];

beforeAll(async () => {
  // As the reference endpoint serves its payments: a 2025-era client is asked for approval too.
  stack = await startFixtureStack({ env: { CONFIRMATION_OPT_OUT_TOOLS: '' } });
  token = await stack.tokenFor(TENANT);
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
    onApprovalLink: (link) => decideAsLocalPerson(link.url, { tenant: TENANT, decision: 'approve' }),
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

let intentNumber = 0;
/** fixture_write's arguments for a new intent. */
const noteArgs = (extra: Record<string, unknown> = {}) => ({ note: `note-${++intentNumber}`, ...extra });
/** fixture_order's arguments for a new intent (two business arguments: their order in the object is not business). */
const orderArgs = (extra: Record<string, unknown> = {}) => ({ item: `sku-${++intentNumber}`, quantity: 2, ...extra });
/** fixture_payment's arguments for a new intent (the client adds the operation id). */
const paymentArgs = (amount_minor: number) => ({ amount_minor, currency: 'EUR', payee_id: `payee-${++intentNumber}` });

/** The requests to act under this key that reached the downstream, and the bookings it holds for it. */
const effects = (key: string, downstream = stack.downstream) => ({
  requests: downstream.calls(key),
  bookings: downstream.bookings(key).length,
});
const ONCE = { requests: 1, bookings: 1 };
const NEVER = { requests: 0, bookings: 0 };

describe('lost answers', () => {
  it('retries with the same key and gets the replay; one order exists', async () => {
    const faults = createFaultFetch();
    faults.inject({ tool: WRITE, fault: { mode: 'lose-response' }, times: 1 });
    const { client, sleeps } = testClient({ fetch: faults.fetch });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 2, result: { outcome: 'succeeded', replayed: true } });
    expect(faults.callsTo(WRITE)).toBe(2);
    expect(sleeps).toHaveLength(1);
    expect(call.status).toMatch(/^fixture_write ik_.+ : succeeded \(replayed\), booking_id .+ \[2 attempts\]$/);
    expect(effects(call.key)).toEqual(ONCE);
  });

  it('also when a real socket is cut after the server answered', async () => {
    proxy.inject(WRITE, { mode: 'reset-after' }, 2);
    const before = proxy.callsTo(WRITE);
    const { client } = testClient({ url: proxy.url });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 3, result: { replayed: true } });
    expect(proxy.callsTo(WRITE) - before).toBe(3);
    expect(effects(call.key)).toEqual(ONCE);
  });
});

describe('transport errors', () => {
  it('retries resets, 503 and 429 with the same key, waiting at least the Retry-After', async () => {
    proxy.inject(WRITE, { mode: 'reset-before' }, 1);
    proxy.inject(WRITE, { mode: 'status', status: 503 }, 1);
    proxy.inject(WRITE, { mode: 'status', status: 429, retryAfterSeconds: 7 }, 1);
    const { client, sleeps } = testClient({ url: proxy.url });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

    expect(call).toMatchObject({ state: 'succeeded', attempts: 4, result: { outcome: 'succeeded', replayed: false } });
    // Full jitter at random() = 0.5 under ceilings 200, 400, 800 ms; the 429's Retry-After (7 s) is a floor.
    expect(sleeps).toEqual([100, 200, 7000]);
    expect(effects(call.key)).toEqual(ONCE);
  });

  it('retries a refused connection and reports the intent as not sent when the budget runs out', async () => {
    const port = await freePort(); // nothing listens there
    const counter = countingFetch();
    const { client, sleeps } = testClient({ url: `http://127.0.0.1:${port}/mcp`, fetch: counter.fetch, retry: { maxAttempts: 3 } });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

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
    proxy.inject(WRITE, { mode: 'status', status: 502 }, 100);
    const before = proxy.callsTo(WRITE);
    const { client, sleeps } = testClient({ url: proxy.url, retry: { maxAttempts: 4 } });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });
    proxy.clear();

    expect(proxy.callsTo(WRITE) - before).toBe(4);
    expect(sleeps).toHaveLength(3);
    expect(call).toMatchObject({ state: 'unknown', attempts: 4, failure: { kind: 'transport', httpStatus: 502 } });
    expect(client.ledger.entries().find((e) => e.key === call.key)).toMatchObject({ state: 'unknown', attempts: 4 });
  });

  it('does not start a wait that would cross maxElapsedMs', async () => {
    const faults = createFaultFetch();
    faults.inject({ tool: WRITE, fault: { mode: 'status', status: 503 }, times: 100 });
    // random() just under 1: waits of 99, 199, 399, 799 ms; the fourth would end past 1000 ms.
    const { client, sleeps } = testClient({
      fetch: faults.fetch,
      random: () => 0.999,
      retry: { maxAttempts: 100, maxElapsedMs: 1000, baseDelayMs: 100, maxDelayMs: 10_000 },
    });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

    expect(sleeps).toEqual([99, 199, 399]);
    expect(faults.callsTo(WRITE)).toBe(4);
    expect(call.attempts).toBe(4);
  });
});

describe('deterministic errors return at once', () => {
  it('rejected arguments', async () => {
    const faults = createFaultFetch();
    const { client, sleeps } = testClient({ fetch: faults.fetch });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs({ note: '' }) });

    expect(call).toMatchObject({
      state: 'failed',
      attempts: 1,
      result: { outcome: 'rejected', retryable: false, error: { code: 'INVALID_ARGUMENTS' } },
    });
    expect(faults.callsTo(WRITE)).toBe(1);
    expect(sleeps).toEqual([]);
    expect(effects(call.key)).toEqual(NEVER);
  });

  it('conflict: the same named intent re-planned with other arguments', async () => {
    const { client, sleeps } = testClient();
    const first = await client.callWrite({ tool: WRITE, intent: 'write-for-conflict', args: noteArgs() });
    const second = await client.callWrite({ tool: WRITE, intent: 'write-for-conflict', args: noteArgs() });

    expect(first.state).toBe('succeeded');
    expect(second).toMatchObject({ key: first.key, state: 'failed', attempts: 1, result: { outcome: 'conflict' } });
    expect(sleeps).toEqual([]);
    expect(effects(first.key)).toEqual(ONCE);
    expect(stack.downstream.bookings(first.key)[0]!.payload).toEqual({ note: expect.stringMatching(/^note-/) });
  });

  it('HTTP 401', async () => {
    const counter = countingFetch();
    const { client, sleeps } = testClient({ token: 'not-a-token', fetch: counter.fetch });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

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
    const first = await client.callWrite({ tool: ORDER, args });
    const replanned = await client.callWrite({
      tool: ORDER,
      args: { quantity: args.quantity, item: args.item, trace_id: 'trace-2', idempotency_key: 'model-made-up-key' },
    });

    expect(first).toMatchObject({ newIntent: true, result: { replayed: false } });
    expect(replanned).toMatchObject({ key: first.key, newIntent: false, state: 'succeeded', result: { replayed: true } });
    expect(replanned.result?.result).toEqual(first.result?.result);
    // The one order of the key is in the table; the made-up key made none.
    expect(await fixtureOrder(stack, TENANT, first.key)).toMatchObject({ item: args.item, quantity: args.quantity });
    expect(await fixtureOrder(stack, TENANT, 'model-made-up-key')).toBeUndefined();
  });

  it('a new intent gets a new key: other arguments, another intent name, another session', async () => {
    const args = noteArgs();
    const { client } = testClient();
    const { client: otherSession } = testClient({ session: 'session-2' });
    const calls = [
      await client.callWrite({ tool: WRITE, args }),
      await client.callWrite({ tool: WRITE, args: { note: `${args.note}, other` } }),
      await client.callWrite({ tool: WRITE, args, intent: 'second write, same contents' }),
      await otherSession.callWrite({ tool: WRITE, args }),
    ];

    expect(new Set(calls.map((c) => c.key)).size).toBe(4);
    for (const call of calls) expect(call).toMatchObject({ newIntent: true, result: { outcome: 'succeeded', replayed: false } });
    for (const call of calls) expect(effects(call.key)).toEqual(ONCE);
  });

  it('concurrent duplicates of one intent send one key and make one order', async () => {
    const { client } = testClient();
    const args = noteArgs();
    const calls = await Promise.all(Array.from({ length: 8 }, () => client.callWrite({ tool: WRITE, args })));

    expect(new Set(calls.map((c) => c.key)).size).toBe(1);
    expect(calls.filter((c) => c.result?.replayed === false)).toHaveLength(1);
    expect(effects(calls[0]!.key)).toEqual(ONCE);
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
  return {
    fetch: recording,
    hints: (tool: string) => calls.filter((c) => c.tool === tool).map((c) => c.meta[LIKELY_REPLAY_META_KEY] === true),
    calls,
  };
}

describe('the replay hint (a key sent again says so in _meta)', () => {
  it.each(['auto', 'legacy'] as const)(
    'is on the retry after a lost answer, never on the first send (protocolEra %s)',
    async (protocolEra) => {
      const faults = createFaultFetch();
      faults.inject({ tool: WRITE, fault: { mode: 'lose-response' }, times: 1 });
      const recorder = metaRecordingFetch(faults.fetch);
      const { client } = testClient({ fetch: recorder.fetch, protocolEra });

      const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

      expect(call).toMatchObject({ state: 'succeeded', attempts: 2, result: { replayed: true } });
      expect(recorder.hints(WRITE)).toEqual([false, true]);
      // On 2026-07-28 the hint rides next to the protocol's own envelope keys.
      const envelope = recorder.calls.at(-1)!.meta['io.modelcontextprotocol/protocolVersion'];
      expect(envelope).toBe(protocolEra === 'auto' ? '2026-07-28' : undefined);
      expect(effects(call.key)).toEqual(ONCE);
    },
  );

  it('is on a re-planned call of a sent intent, and not on a new intent', async () => {
    const recorder = metaRecordingFetch();
    const { client } = testClient({ fetch: recorder.fetch });
    const args = noteArgs();
    const first = await client.callWrite({ tool: WRITE, args });
    const again = await client.callWrite({ tool: WRITE, args });
    const other = await client.callWrite({ tool: WRITE, args: noteArgs() });

    expect([first.result?.replayed, again.result?.replayed, other.result?.replayed]).toEqual([false, true, false]);
    expect(recorder.hints(WRITE)).toEqual([false, true, false]);
    expect([effects(first.key), effects(other.key)]).toEqual([ONCE, ONCE]);
  });

  it('is not on the first send after attempts that never left the machine (connection refused)', async () => {
    const faults = createFaultFetch();
    // Every POST refused: the connection (server/discover or initialize) never opens, so nothing is sent.
    faults.inject({ fault: { mode: 'refuse' }, times: 2 });
    const recorder = metaRecordingFetch(faults.fetch);
    const { client } = testClient({ fetch: recorder.fetch, operationIdTools: [] });

    const call = await client.callWrite({ tool: WRITE, args: noteArgs() });

    expect(call).toMatchObject({ state: 'succeeded', result: { replayed: false } });
    // Told the operation-id tools, the client lists nothing, so the SDK's first 2026-07-28 send carries no
    // Mcp-Param header: the server refuses it (400 / -32020, nothing ran) and the SDK lists the tools and sends again.
    // No send of this call is a retry of one that may have run.
    const hints = recorder.hints(WRITE);
    expect(hints.length).toBeGreaterThanOrEqual(1);
    expect(hints).not.toContain(true);
    expect(effects(call.key)).toEqual(ONCE);
  });
});

describe('operation ids', () => {
  it('are used for the tools the server lists as taking one (an input schema requiring operation_id), and no tool name is built in', async () => {
    const args = paymentArgs(410);
    const learnt = await testClient().client.callWrite({ tool: PAY, args });
    expect(learnt).toMatchObject({ keyKind: 'operation_id', state: 'succeeded', key: expect.stringMatching(/^op_/) });
    expect(effects(learnt.key)).toEqual(ONCE);
    const write = await testClient().client.callWrite({ tool: WRITE, args: noteArgs() });
    expect(write).toMatchObject({ keyKind: 'idempotency_key', state: 'succeeded' });
    // Told otherwise, the client believes it: the server then refuses the client key, and nothing is paid.
    const told = await testClient({ operationIdTools: [] }).client.callWrite({ tool: PAY, args: { ...args, amount_minor: 411 } });
    expect(told).toMatchObject({ keyKind: 'idempotency_key', state: 'failed', result: { outcome: 'rejected' } });
    expect(effects(told.key)).toEqual(NEVER);
    expect(stack.downstream.bookings().filter((b) => b.payload.payee_id === args.payee_id)).toHaveLength(1);
  });

  it('are issued once per intent and reused on every retry and re-plan', async () => {
    const faults = createFaultFetch();
    // The answer of the round that pays (the one carrying the person's yes) is lost.
    faults.inject({ tool: PAY, answered: true, fault: { mode: 'lose-response' }, times: 1 });
    const { client } = testClient({ fetch: faults.fetch });
    const args = paymentArgs(1250);

    const first = await client.callWrite({ tool: PAY, args });
    const replanned = await client.callWrite({ tool: PAY, args: { ...args, trace_id: 'trace-2' } });
    const newIntent = await client.callWrite({ tool: PAY, args: { ...args, amount_minor: 1300 } });

    expect(first).toMatchObject({ keyKind: 'operation_id', state: 'succeeded', attempts: 2, result: { replayed: true } });
    expect(replanned).toMatchObject({ key: first.key, newIntent: false, result: { replayed: true } });
    expect(newIntent.key).not.toBe(first.key);
    expect(faults.callsTo('issue_operation_id')).toBe(2);
    // Asked and answered, then one replay (the operation ran: not asked again), one replay, asked and answered.
    expect(faults.callsTo(PAY)).toBe(6);
    expect([effects(first.key), effects(newIntent.key)]).toEqual([ONCE, ONCE]);
    const payments = stack.downstream.bookings().filter((b) => b.payload.payee_id === args.payee_id);
    expect(payments.map((p) => p.payload.amount_minor).sort()).toEqual([1250, 1300]);
  });

  it('are asked for again while the server cannot read its key for a moment; the payment then runs once', async () => {
    // A server as deployed: the key by ARN, read from Secrets Manager (a stand-in here).
    const secretArn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:operation-ids';
    const secrets = await startSecretsManager({ [secretArn]: 'k'.repeat(48) });
    const deployedLike = await startFixtureStack({
      env: {
        CONFIRMATION_OPT_OUT_TOOLS: '',
        OPERATION_ID_SECRET: undefined,
        OPERATION_ID_SECRET_ARN: secretArn,
        SECRETS_MANAGER_ENDPOINT: secrets.endpoint,
      },
    });
    try {
      secrets.failNext = 2;
      const { client, sleeps } = testClient({ url: deployedLike.mcpUrl, token: await deployedLike.tokenFor(TENANT) });
      const args = paymentArgs(700);

      const call = await client.callWrite({ tool: PAY, args });

      expect(call).toMatchObject({ keyKind: 'operation_id', state: 'succeeded', result: { replayed: false } });
      expect(secrets.requests).toHaveLength(3);
      // Two waits while the key was unreadable (full jitter at random() = 0.5), then one while the person approved.
      expect(sleeps).toEqual([100, 200, 2000]);
      expect(effects(call.key, deployedLike.downstream)).toEqual(ONCE);
      expect(deployedLike.downstream.calls()).toBe(1);
    } finally {
      await deployedLike.stop();
      await secrets.stop();
    }
  });

  it('are replaced once when the server refuses an old one under which nothing ran (expired, or not ours)', async () => {
    const args = paymentArgs(990);
    const ledger = new CallLedger();
    const stale = `op_1.${'a'.repeat(22)}.${'b'.repeat(43)}`;
    ledger.create({ session: 'session-1', tool: PAY, fingerprint: fingerprint(args) }, stale, 'operation_id');
    const faults = createFaultFetch();
    const { client } = testClient({ fetch: faults.fetch, ledger });

    const call = await client.callWrite({ tool: PAY, args });

    expect(call).toMatchObject({ newIntent: false, state: 'succeeded', attempts: 2, result: { replayed: false } });
    expect(call.key).not.toBe(stale);
    expect(faults.callsTo('issue_operation_id')).toBe(1);
    expect(ledger.entries().map((e) => e.key)).toEqual([call.key]);
    expect([effects(stale), effects(call.key)]).toEqual([NEVER, ONCE]);
  });
});

describe('ledger persistence', () => {
  it('a restarted agent keeps its keys: the same intent after a restart is a replay', async () => {
    const file = join(dir, 'agent-ledger.json');
    const args = noteArgs();
    // The first run's answer is lost and it has no budget left to retry: the intent is unknown when it stops.
    const faults = createFaultFetch();
    faults.inject({ tool: WRITE, fault: { mode: 'lose-response' }, times: 1 });
    const { client: beforeRestart } = testClient({
      fetch: faults.fetch,
      ledger: await CallLedger.open({ file }),
      retry: { maxAttempts: 1 },
    });
    const lost = await beforeRestart.callWrite({ tool: WRITE, args });
    await beforeRestart.close();
    expect(lost).toMatchObject({ state: 'unknown', attempts: 1 });

    const { client: afterRestart } = testClient({ ledger: await CallLedger.open({ file }) });
    const again = await afterRestart.callWrite({ tool: WRITE, args });

    expect(again).toMatchObject({ key: lost.key, newIntent: false, state: 'succeeded', attempts: 1, result: { replayed: true } });
    expect(effects(lost.key)).toEqual(ONCE);
    expect(afterRestart.ledger.entries().find((e) => e.key === lost.key)).toMatchObject({ state: 'succeeded', attempts: 2 });
  });
});
