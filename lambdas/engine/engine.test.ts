import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../core/errors';
import { DEFAULT_NON_BUSINESS_FIELDS, fingerprint } from '../core/fingerprint';
import {
  IdempotencyEngine,
  InMemoryIdempotencyStore,
  TerminalToolError,
  TransientToolError,
  UncertainToolError,
  type EngineOptions,
  type Execution,
} from 'idempotent-mcp/engine';

/**
 * The engine's unit suite: the whole state machine on the in-memory store, no DynamoDB Local. The same behaviours
 * run against DynamoDB in test/engine/; the store conformance suite holds both stores to one contract.
 */
const TENANT = 'tenant-a';
const newKey = () => `key-${randomUUID()}`;

function setup(options: Partial<EngineOptions> = {}) {
  let now = Date.UTC(2030, 0, 1);
  const store = new InMemoryIdempotencyStore();
  const engine = new IdempotencyEngine({
    store,
    clock: () => now,
    sleep: async (ms) => void (now += ms),
    inProgressWaitMs: 50,
    ...options,
  });
  return { store, engine, advance: (ms: number) => void (now += ms), now: () => now };
}

const request = (tool: string, idempotencyKey: string, args: Record<string, unknown> = { amount: 10 }) => ({
  tenant: TENANT,
  tool,
  idempotencyKey,
  args,
});

describe('the engine on the in-memory store', () => {
  it('runs a first call once and replays its result to every retry, whatever the tool name style', async () => {
    const { engine } = setup();
    for (const tool of ['create_order', 'createOrder', 'orders.create']) {
      const key = newKey();
      let runs = 0;
      const execute = async (): Promise<Execution<{ n: number }>> => ({ result: { n: ++runs } });
      expect(await engine.run(request(tool, key), {}, execute)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { n: 1 } });
      expect(await engine.run(request(tool, key), {}, execute)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { n: 1 } });
      expect(runs).toBe(1);
    }
  });

  it('keeps tools apart: the same key on two tools is two operations', async () => {
    const { engine } = setup();
    const key = newKey();
    const a = await engine.run(request('orders.create', key), {}, async () => ({ result: 'a' }));
    const b = await engine.run(request('ordersCreate', key), {}, async () => ({ result: 'b' }));
    expect([a.result, b.result]).toEqual(['a', 'b']);
  });

  it('refuses the same key with other arguments as a conflict, running nothing', async () => {
    const { engine } = setup();
    const key = newKey();
    await engine.run(request('pay', key, { amount: 10 }), {}, async () => ({ result: 1 }));
    let ran = false;
    const answer = await engine.run(request('pay', key, { amount: 11 }), {}, async () => ((ran = true), { result: 2 }));
    expect(answer).toMatchObject({ outcome: 'conflict', retryable: false });
    expect(ran).toBe(false);
  });

  it('runs concurrent duplicates once; the others answer from the first', async () => {
    const { engine } = setup();
    const key = newKey();
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const execute = async () => {
      runs++;
      await gate;
      return { result: 'done' };
    };
    const first = engine.run(request('pay', key), {}, execute);
    const second = await engine.run(request('pay', key), {}, execute);
    expect(second).toMatchObject({ outcome: 'in_progress', retryable: true });
    release();
    expect(await first).toMatchObject({ outcome: 'succeeded', result: 'done' });
    expect(runs).toBe(1);
  });

  it('a business refusal is final and replayed; a transient failure frees the key; an uncertain one is UNKNOWN', async () => {
    const { engine, store } = setup();
    const refused = newKey();
    const decline = async () => {
      throw new TerminalToolError('CARD_DECLINED', 'declined');
    };
    expect(await engine.run(request('pay', refused), {}, decline)).toMatchObject({
      outcome: 'failed',
      retryable: false,
      error: { code: 'CARD_DECLINED' },
    });
    expect(await engine.run(request('pay', refused), {}, async () => ({ result: 'x' }))).toMatchObject({
      outcome: 'failed',
      replayed: true,
    });

    const transient = newKey();
    expect(
      await engine.run(request('pay', transient), {}, async () => {
        throw new TransientToolError('DOWNSTREAM_BUSY', 'busy');
      }),
    ).toMatchObject({ outcome: 'failed', retryable: true });
    expect(await engine.run(request('pay', transient), {}, async () => ({ result: 'second try' }))).toMatchObject({
      outcome: 'succeeded',
      result: 'second try',
    });

    const uncertain = newKey();
    expect(
      await engine.run(request('pay', uncertain), {}, async () => {
        throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'timed out');
      }),
    ).toMatchObject({ outcome: 'unknown', retryable: true });
    expect(await store.get({ tenant: TENANT, tool: 'pay', idempotencyKey: uncertain })).toMatchObject({ status: 'UNKNOWN' });
    let ran = false;
    expect(await engine.run(request('pay', uncertain), {}, async () => ((ran = true), { result: 'x' }))).toMatchObject({
      outcome: 'unknown',
    });
    expect(ran).toBe(false);
  });

  it("commits the tool's writes with the result, or nothing when a write is refused", async () => {
    const { engine, store } = setup();
    const item = { pk: `ORDER#${TENANT}#o-1-${randomUUID()}`, sk: 'ORDER' };
    const key = newKey();
    expect(
      await engine.run(request('orders.create', key), {}, async () => ({
        result: 'o-1',
        writes: [{ create: { key: item, item: { total: 1 } } }],
      })),
    ).toMatchObject({
      outcome: 'succeeded',
    });
    expect(store.item(item)).toMatchObject({ total: 1 });
    const clash = newKey();
    const answer = await engine.run(request('orders.create', clash), {}, async () => ({
      result: 'again',
      writes: [{ create: { key: item, item: { total: 2 } } }],
    }));
    expect(answer).toMatchObject({ outcome: 'failed', retryable: true });
    expect(store.item(item)).toMatchObject({ total: 1 });
    expect(await store.get({ tenant: TENANT, tool: 'orders.create', idempotencyKey: clash })).toBeUndefined();
  });

  it('replays until retention ends, then runs again (or asks for review under that policy)', async () => {
    const { engine, advance } = setup();
    const key = newKey();
    let runs = 0;
    const execute = async () => ({ result: ++runs });
    await engine.run(request('pay', key), { retentionSeconds: 60 }, execute);
    advance(59_000);
    expect(await engine.run(request('pay', key), { retentionSeconds: 60 }, execute)).toMatchObject({ replayed: true, result: 1 });
    advance(2000);
    expect(await engine.run(request('pay', key), { retentionSeconds: 60 }, execute)).toMatchObject({ replayed: false, result: 2 });

    const reviewed = newKey();
    await engine.run(request('pay', reviewed), { retentionSeconds: 60, onExpired: 'review' }, execute);
    advance(61_000);
    expect(await engine.run(request('pay', reviewed), { retentionSeconds: 60, onExpired: 'review' }, execute)).toMatchObject({
      outcome: 'failed',
      error: { code: 'REVIEW_REQUIRED' },
    });
  });

  // Found by the race exploration (test/proof/engine-races.test.ts, FC_SEED=-615934427): the key was released after a
  // takeover, and its next call was told "failed, nothing ran" while the stale execution's effect existed; with a
  // downstream that does not deduplicate, the release is a second effect (issue 30).
  it('after taking over a stale execution, a transient failure keeps the key UNKNOWN until the stale request can no longer land', async () => {
    class MarkFailsOnce extends InMemoryIdempotencyStore {
      failing = true;
      override async markUnknown(...args: Parameters<InMemoryIdempotencyStore['markUnknown']>) {
        if (this.failing) {
          this.failing = false;
          throw new StoreUnavailableError('the store did not answer');
        }
        return super.markUnknown(...args);
      }
    }
    const store = new MarkFailsOnce();
    const { engine, advance, now } = setup({ store, downstreamTimeoutMs: 3000, unknownRetryAfterMs: 5000 });
    const key = newKey();
    const identity = { tenant: TENANT, tool: 'pay', idempotencyKey: key };
    const policy = { reexecuteSafe: true, executionTimeoutMs: 2000 };
    const windowMs = 2000 + 3000; // the default: execution timeout + downstream timeout
    const throttled = async (): Promise<never> => {
      throw new TransientToolError('THROTTLED', 'the downstream refused before acting');
    };
    // The first executor may have acted (its answer was lost) and its record could not be marked: PROCESSING until its lease passes.
    const lost = async (): Promise<never> => {
      throw new UncertainToolError('TIMEOUT', 'no answer from the downstream');
    };
    expect(await engine.run(request('pay', key), policy, lost)).toMatchObject({ outcome: 'unknown' });
    advance(60_000);
    // The second call takes over and is refused before acting: the first execution may have happened, or its request
    // may still land. The key is not released: it is UNKNOWN, decidable once the window has passed.
    const takenOver = await engine.run(request('pay', key), policy, throttled);
    expect(takenOver).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'OUTCOME_UNKNOWN' } });
    expect(takenOver.retry_after_ms).toBe(windowMs + 5000);
    expect(await store.get(identity)).toMatchObject({ status: 'UNKNOWN', inFlightUntil: now() + windowMs });
    // A retry inside the window runs nothing and is told when to come back.
    let ran = false;
    advance(1000);
    const retry = await engine.run(request('pay', key), policy, async () => ((ran = true), { result: { ok: true } }));
    expect(retry).toMatchObject({ outcome: 'unknown', retry_after_ms: windowMs - 1000 + 5000 });
    expect(ran).toBe(false);
    // A call that claimed a free key and was refused still says nothing happened.
    expect(await engine.run(request('pay', newKey()), policy, throttled)).toMatchObject({
      outcome: 'failed',
      retryable: true,
      error: { code: 'THROTTLED' },
    });
  });

  it('a call fenced out of a key that was released and reused with other arguments answers conflict, never their result', async () => {
    const { engine, store, advance, now } = setup();
    const key = newKey();
    const policy = { reexecuteSafe: true };
    let other: unknown;
    // Call B runs past its lease; the reconciler finds its record orphaned, asks the downstream (absent) and releases
    // the key; call A, with other arguments, then claims it and succeeds.
    const slow = async () => {
      advance(120_000);
      const record = (await store.get({ tenant: TENANT, tool: 'pay', idempotencyKey: key }))!;
      expect(await store.expireLease(record, now(), now())).toBe(true);
      const unknown = (await store.get({ tenant: TENANT, tool: 'pay', idempotencyKey: key }))!;
      expect(await store.reconcile(unknown, { event: 'reconciled_absent' }, now())).toBe(true);
      other = await engine.run(request('pay', key, { amount: 99 }), policy, async () => ({ result: { paid: 99 } }));
      return { result: { paid: 10 } };
    };
    const fencedOut = await engine.run(request('pay', key, { amount: 10 }), policy, slow);
    expect(other).toMatchObject({ outcome: 'succeeded', result: { paid: 99 } });
    // B's completion is refused by the fence; the record it then reads is A's, for other arguments.
    expect(fencedOut).not.toMatchObject({ outcome: 'succeeded', result: { paid: 99 } });
    expect(fencedOut).toMatchObject({ outcome: 'conflict', error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
  });

  it('a takeover read from a stale record never takes over the claim another call made since: conflict, nothing runs', async () => {
    const key = newKey();
    const identity = { tenant: TENANT, tool: 'pay', idempotencyKey: key };
    let interleave: (() => Promise<void>) | undefined;
    // Between the follower's read and its takeover, the stale execution is released and a call with other arguments
    // claims the key and stalls past its own lease.
    class Interleaved extends InMemoryIdempotencyStore {
      override async takeOver(...args: Parameters<InMemoryIdempotencyStore['takeOver']>) {
        const before = interleave;
        interleave = undefined;
        await before?.();
        return super.takeOver(...args);
      }
    }
    const store = new Interleaved();
    const { engine, advance, now } = setup({ store });
    const policy = { reexecuteSafe: true, executionTimeoutMs: 2000 };
    const stale = async (): Promise<never> => {
      advance(60_000); // the executor stalls past its lease, then its process dies
      return new Promise<never>(() => {});
    };
    void engine.run(request('pay', key), policy, stale);
    await new Promise((resolve) => setImmediate(resolve));
    const staleOwner = (await store.get(identity))!.ownerToken;
    interleave = async () => {
      expect(await store.release(identity, staleOwner)).toBe(true);
      const claimed = await store.claim(
        {
          ...identity,
          fingerprint: fingerprint({ amount: 99 }, DEFAULT_NON_BUSINESS_FIELDS),
          status: 'PROCESSING',
          ownerToken: 'the other call',
          createdAt: now(),
          updatedAt: now(),
          leaseExpiresAt: now() - 1, // stalled at once: its lease has passed when the follower's takeover arrives
          retainUntil: now() + 3600_000,
          expiresAt: Math.floor((now() + 3600_000) / 1000),
        },
        now(),
      );
      expect(claimed).toMatchObject({ claimed: true });
    };
    let ran = false;
    const follower = await engine.run(request('pay', key), policy, async () => ((ran = true), { result: { paid: 10 } }));
    expect(follower).toMatchObject({ outcome: 'conflict', error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    expect(ran).toBe(false);
    expect(await store.get(identity)).toMatchObject({ status: 'PROCESSING', ownerToken: 'the other call' });
  });

  it('refuses bad input with the contract codes, running nothing', async () => {
    const { engine } = setup();
    const never = async () => {
      throw new Error('must not run');
    };
    expect(await engine.run(request('pay', 'short'), {}, never)).toMatchObject({
      outcome: 'rejected',
      error: { code: 'INVALID_IDEMPOTENCY_KEY' },
    });
    expect(await engine.run({ ...request('pay', newKey()), tenant: 'a#b' }, {}, never)).toMatchObject({
      outcome: 'rejected',
      error: { code: 'INVALID_TENANT' },
    });
    await expect(engine.run(request('pay#x', newKey()), {}, never)).rejects.toThrow(/tool name/);
  });

  it('refuses a call that needs a person when the engine was built without a confirmation gate, and writes nothing', async () => {
    const { engine, store } = setup();
    const key = newKey();
    let runs = 0;
    const pay = async () => ({ result: ++runs });
    await expect(engine.runConfirmed(request('pay', key), { how: 'page', summary: 'Pay 10 EUR' }, {}, pay)).rejects.toThrow(
      'pay needs a confirmation, and this engine was built without one (EngineOptions.confirmation)',
    );
    expect(runs).toBe(0);
    expect(await store.get({ tenant: TENANT, tool: 'pay', idempotencyKey: key })).toBeUndefined();
  });
});

describe("a local tool's retry on the engine that answered it", () => {
  /** Counts the store's requests by method. */
  class CountingStore extends InMemoryIdempotencyStore {
    readonly calls = { get: 0, commitOnce: 0, claim: 0 };
    override async get(...args: Parameters<InMemoryIdempotencyStore['get']>) {
      this.calls.get++;
      return super.get(...args);
    }
    override async commitOnce(...args: Parameters<InMemoryIdempotencyStore['commitOnce']>) {
      this.calls.commitOnce++;
      return super.commitOnce(...args);
    }
    override async claim(...args: Parameters<InMemoryIdempotencyStore['claim']>) {
      this.calls.claim++;
      return super.claim(...args);
    }
    reset() {
      this.calls.get = this.calls.commitOnce = this.calls.claim = 0;
    }
  }
  const localRequest = (key: string, args: Record<string, unknown> = { amount: 10 }) => ({
    ...request('create_order', key, args),
    effect: 'local' as const,
  });
  const item = () => ({ pk: `ORDER#${TENANT}#${randomUUID()}`, sk: 'ORDER' });
  function localSetup(options: Partial<EngineOptions> = {}) {
    let now = Date.UTC(2030, 0, 1);
    const store = new CountingStore();
    const make = () =>
      new IdempotencyEngine({ store, clock: () => now, sleep: async (ms) => void (now += ms), inProgressWaitMs: 50, ...options });
    return { store, engine: make(), otherContainer: make(), advance: (ms: number) => void (now += ms) };
  }

  it('is answered from the record read first: the tool does not run again and no transaction is sent', async () => {
    const { engine, store } = localSetup();
    const key = newKey();
    let runs = 0;
    const execute = async () => ({ result: { n: ++runs }, writes: [{ create: { key: item(), item: {} } }] });
    expect(await engine.run(localRequest(key), {}, execute)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { n: 1 } });
    store.reset();
    expect(await engine.run(localRequest(key), {}, execute)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { n: 1 } });
    expect(store.calls).toEqual({ get: 1, commitOnce: 0, claim: 0 });
    store.reset();
    let ran = false;
    expect(await engine.run(localRequest(key, { amount: 11 }), {}, async () => ((ran = true), { result: { n: 0 } }))).toMatchObject({
      outcome: 'conflict',
    });
    expect(store.calls).toEqual({ get: 1, commitOnce: 0, claim: 0 });
    expect([runs, ran]).toEqual([1, false]);
  });

  it('on another engine (another container) the refused commit answers it, as before', async () => {
    const { engine, otherContainer, store } = localSetup();
    const key = newKey();
    await engine.run(localRequest(key), {}, async () => ({ result: 'first' }));
    store.reset();
    expect(await otherContainer.run(localRequest(key), {}, async () => ({ result: 'second' }))).toMatchObject({
      replayed: true,
      result: 'first',
    });
    expect(store.calls).toEqual({ get: 0, commitOnce: 1, claim: 0 });
  });

  it('a remembered key found free (past retention) commits again in one request: the read only short-cuts a held key', async () => {
    const { engine, store, advance } = localSetup();
    const key = newKey();
    let runs = 0;
    const execute = async () => ({ result: ++runs });
    await engine.run(localRequest(key), { retentionSeconds: 60 }, execute);
    advance(61_000);
    store.reset();
    expect(await engine.run(localRequest(key), { retentionSeconds: 60 }, execute)).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
      result: 2,
    });
    expect(store.calls).toEqual({ get: 1, commitOnce: 1, claim: 0 });
    expect(await engine.run(localRequest(key), { retentionSeconds: 60 }, execute)).toMatchObject({ replayed: true, result: 2 });
    expect(runs).toBe(2);
  });

  it("on another engine (another container) a client's replay hint reads first: one read, no transaction, the tool does not run", async () => {
    const { engine, otherContainer, store } = localSetup();
    const key = newKey();
    let runs = 0;
    const execute = async () => ({ result: { n: ++runs }, writes: [{ create: { key: item(), item: {} } }] });
    await engine.run(localRequest(key), {}, execute);
    store.reset();
    const hinted = (args?: Record<string, unknown>) => ({ ...localRequest(key, args), likelyReplay: true });
    expect(await otherContainer.run(hinted(), {}, execute)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { n: 1 } });
    expect(store.calls).toEqual({ get: 1, commitOnce: 0, claim: 0 });
    store.reset();
    // Other arguments under the hint: the read answers conflict, and nothing runs.
    expect(await new IdempotencyEngine({ store, inProgressWaitMs: 50 }).run(hinted({ amount: 11 }), {}, execute)).toMatchObject({
      outcome: 'conflict',
    });
    expect(store.calls).toEqual({ get: 1, commitOnce: 0, claim: 0 });
    expect(runs).toBe(1);
  });

  it('a replay hint on a first call (wrong or forged) costs one read: the key is found free and executes once', async () => {
    const { engine, otherContainer, store } = localSetup();
    const key = newKey();
    let runs = 0;
    const execute = async () => ({ result: { n: ++runs }, writes: [{ create: { key: item(), item: {} } }] });
    expect(await engine.run({ ...localRequest(key), likelyReplay: true }, {}, execute)).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
      result: { n: 1 },
    });
    expect(store.calls).toEqual({ get: 1, commitOnce: 1, claim: 0 });
    store.reset();
    // Another container, the same hint again: now the record answers it.
    expect(await otherContainer.run({ ...localRequest(key), likelyReplay: true }, {}, execute)).toMatchObject({
      replayed: true,
      result: { n: 1 },
    });
    expect(store.calls).toEqual({ get: 1, commitOnce: 0, claim: 0 });
    // A hinted first call with other arguments under a fresh key: its own execution, once.
    const other = newKey();
    expect(await otherContainer.run({ ...localRequest(other, { amount: 11 }), likelyReplay: true }, {}, execute)).toMatchObject({
      replayed: false,
      result: { n: 2 },
    });
    expect(runs).toBe(2);
  });

  it('a replay hint on a tool whose effect is external changes nothing: no read first', async () => {
    const { engine, otherContainer, store } = localSetup();
    const key = newKey();
    await engine.run(request('create_order', key, { amount: 1 }), {}, async () => ({ result: 'first' }));
    store.reset();
    expect(
      await otherContainer.run({ ...request('create_order', key, { amount: 1 }), likelyReplay: true }, {}, async () => ({
        result: 'second',
      })),
    ).toMatchObject({
      replayed: true,
      result: 'first',
    });
    expect(store.calls).toEqual({ get: 0, commitOnce: 0, claim: 1 });
  });

  it('remembers only the most recent keys, and none with answeredKeys 0', async () => {
    const one = localSetup({ answeredKeys: 1 });
    const [a, b] = [newKey(), newKey()];
    await one.engine.run(localRequest(a), {}, async () => ({ result: 'a' }));
    await one.engine.run(localRequest(b), {}, async () => ({ result: 'b' }));
    one.store.reset();
    await one.engine.run(localRequest(b), {}, async () => ({ result: 'x' }));
    expect(one.store.calls).toEqual({ get: 1, commitOnce: 0, claim: 0 });
    one.store.reset();
    expect(await one.engine.run(localRequest(a), {}, async () => ({ result: 'x' }))).toMatchObject({ replayed: true, result: 'a' });
    expect(one.store.calls).toEqual({ get: 0, commitOnce: 1, claim: 0 });

    const off = localSetup({ answeredKeys: 0 });
    const key = newKey();
    await off.engine.run(localRequest(key), {}, async () => ({ result: 'a' }));
    off.store.reset();
    expect(await off.engine.run(localRequest(key), {}, async () => ({ result: 'x' }))).toMatchObject({ replayed: true, result: 'a' });
    expect(off.store.calls).toEqual({ get: 0, commitOnce: 1, claim: 0 });
  });
});
