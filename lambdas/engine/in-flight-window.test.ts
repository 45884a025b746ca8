import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEFAULT_NON_BUSINESS_FIELDS, fingerprint } from '../core/fingerprint';
import {
  IdempotencyEngine,
  InMemoryIdempotencyStore,
  UncertainToolError,
  type IdempotencyPolicy,
  type IdempotencyRecord,
} from 'idempotent-mcp/engine';
import { Reconciler } from '../reconciler/reconciler';

/**
 * Issue 30 on the in-memory store, one path at a time: a request that lands after its caller gave up, at a provider
 * that does not deduplicate. The reconciler asks while the request is still on its way and hears "not found"; that
 * absence decides nothing until the request's in-flight window has passed. Counts come from the provider's ledger.
 */
const TENANT = 'tenant-window';
const TOOL = 'pay_supplier';
const T0 = Date.UTC(2030, 0, 1);
const POLICY: IdempotencyPolicy = { executionTimeoutMs: 2000 };
const DOWNSTREAM_TIMEOUT_MS = 1000;
/** The default window: the execution timeout plus the downstream timeout. */
const WINDOW_MS = 3000;
const ARGS = { supplier: 'acme', amount_minor: 4200 };

/** A plain provider: books every request it receives, `delayMs` after it arrived, whatever became of the caller. */
class LateProvider {
  readonly ledger: Array<{ key: string; id: string }> = [];
  private readonly inFlight: Array<{ key: string; landsAt: number }> = [];
  constructor(private readonly now: () => number) {}

  send(key: string, delayMs: number) {
    this.inFlight.push({ key, landsAt: this.now() + delayMs });
  }

  find(key: string) {
    this.land();
    return this.ledger.find((e) => e.key === key);
  }

  private land() {
    for (const request of this.inFlight.filter((r) => r.landsAt <= this.now())) {
      this.inFlight.splice(this.inFlight.indexOf(request), 1);
      this.ledger.push({ key: request.key, id: `pay-${this.ledger.length + 1}` });
    }
  }
}

/** The reconciler's per-record steps (its runOnce finds records through DynamoDB's index). */
class ReconcilerSteps extends Reconciler {
  check(record: IdempotencyRecord, now: number) {
    return this.isDue(record, now) ? this.settleUnknown(record, now) : Promise.resolve('not due' as const);
  }

  /** The stale-lease rule of `runOnce`, for one record. */
  expire(record: IdempotencyRecord, now: number) {
    return this.expireLease(record, now);
  }
}

function world() {
  let now = T0;
  const clock = () => now;
  const store = new InMemoryIdempotencyStore();
  const provider = new LateProvider(clock);
  const engine = new IdempotencyEngine({ store, clock, downstreamTimeoutMs: DOWNSTREAM_TIMEOUT_MS, unknownRetryAfterMs: 500 });
  const reconciler = new ReconcilerSteps({
    store,
    tools: new Map([
      [
        TOOL,
        {
          onAbsent: 'release' as const,
          inFlightWindowMs: WINDOW_MS,
          reconcile: async ({ record }: { record: IdempotencyRecord }) => {
            const payment = provider.find(record.idempotencyKey);
            return payment ? { kind: 'found' as const, result: { payment_id: payment.id } } : { kind: 'absent' as const };
          },
        },
      ],
    ]),
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    clock,
    leaseGraceMs: 500,
    maxAttempts: 2,
  });
  const key = `key-${randomUUID()}`;
  const identity = { tenant: TENANT, tool: TOOL, idempotencyKey: key };
  /** The tool: sends the payment, which the provider books `lateMs` after; its own client gives up after 1 s. */
  const pay = (lateMs: number) => async () => {
    provider.send(key, lateMs);
    now += DOWNSTREAM_TIMEOUT_MS;
    throw new UncertainToolError('PROVIDER_TIMEOUT', 'the provider did not answer in time');
  };
  const call = (execute: () => Promise<{ result: unknown }>) => engine.run({ ...identity, args: ARGS }, POLICY, execute);
  const reconcile = async () => reconciler.check((await store.get(identity))!, now);
  return {
    store,
    provider,
    engine,
    reconciler,
    key,
    identity,
    call,
    pay,
    reconcile,
    advance: (ms: number) => void (now += ms),
    now: clock,
  };
}

const mustNotRun = async (): Promise<never> => {
  throw new Error('a retry inside the window must not run the tool again');
};

describe('an absence inside the in-flight window decides nothing', () => {
  it("the executor's own timeout: UNKNOWN until the window passed, then found; one payment, the retry replays", async () => {
    const w = world();
    const first = await w.call(w.pay(2500));
    expect(first).toMatchObject({ outcome: 'unknown', retryable: true, retry_after_ms: WINDOW_MS + 500 });
    const stopped = w.now();
    expect(await w.store.get(w.identity)).toMatchObject({ status: 'UNKNOWN', inFlightUntil: stopped + WINDOW_MS, nextCheckAt: stopped });

    // Checked at once: not found yet. Deferred to the window's end, not counted as an attempt, the key kept.
    expect(await w.reconcile()).toBe('deferred');
    const deferred = (await w.store.get(w.identity))!;
    expect(deferred).toMatchObject({ status: 'UNKNOWN', nextCheckAt: stopped + WINDOW_MS });
    expect(deferred.reconcileAttempts ?? 0).toBe(0);
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'unknown', retry_after_ms: WINDOW_MS + 500 });

    w.advance(WINDOW_MS - 1);
    expect(await w.reconcile()).toBe('not due');
    w.advance(1);
    expect(await w.reconcile()).toBe('found');
    expect(w.provider.ledger).toEqual([{ key: w.key, id: 'pay-1' }]);
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { payment_id: 'pay-1' } });
  });

  it("a follower marks a vanished executor's record UNKNOWN: the window counts from its lease's end", async () => {
    const w = world();
    // The executor claimed, sent the payment and vanished (its process died): the record stays PROCESSING.
    const lease = T0 + POLICY.executionTimeoutMs! + 1000;
    const crashed: IdempotencyRecord = {
      ...w.identity,
      fingerprint: fingerprint(ARGS, DEFAULT_NON_BUSINESS_FIELDS),
      status: 'PROCESSING',
      ownerToken: randomUUID(),
      createdAt: T0,
      updatedAt: T0,
      leaseExpiresAt: lease,
      retainUntil: T0 + 3600_000,
      expiresAt: Math.floor((T0 + 3600_000) / 1000),
    };
    await w.store.claim(crashed, T0);
    w.advance(1900);
    w.provider.send(w.key, 2600); // sent just before its deadline; the provider books it after the lease has passed
    w.advance(lease - w.now() + 1);

    const follower = await w.call(mustNotRun);
    expect(follower).toMatchObject({ outcome: 'unknown', retryable: true });
    expect(follower.retry_after_ms).toBe(lease + WINDOW_MS - w.now() + 500);
    expect(await w.store.get(w.identity)).toMatchObject({
      status: 'UNKNOWN',
      errorType: 'lease_expired',
      inFlightUntil: lease + WINDOW_MS,
    });

    // After the lease and its grace: asked, not found yet, kept.
    w.advance(600);
    expect(await w.reconcile()).toBe('deferred');
    expect(await w.store.get(w.identity)).toMatchObject({ status: 'UNKNOWN', nextCheckAt: lease + WINDOW_MS });
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'unknown' });

    w.advance(lease + WINDOW_MS - w.now());
    expect(await w.reconcile()).toBe('found');
    expect(w.provider.ledger).toHaveLength(1);
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'succeeded', replayed: true });
  });

  it("the reconciler marks a vanished executor's record UNKNOWN: the window counts from its lease's end", async () => {
    const w = world();
    const lease = T0 + POLICY.executionTimeoutMs! + 1000;
    await w.store.claim(
      {
        ...w.identity,
        fingerprint: fingerprint(ARGS, DEFAULT_NON_BUSINESS_FIELDS),
        status: 'PROCESSING',
        ownerToken: randomUUID(),
        createdAt: T0,
        updatedAt: T0,
        leaseExpiresAt: lease,
        retainUntil: T0 + 3600_000,
        expiresAt: Math.floor((T0 + 3600_000) / 1000),
      },
      T0,
    );
    w.advance(1900);
    w.provider.send(w.key, 2600); // sent just before its deadline; booked after the lease and its grace have passed
    w.advance(lease + 500 - w.now());
    // No caller came back: the reconciler's stale-lease rule marks it, then asks at its next run.
    expect(await w.reconciler.expire((await w.store.get(w.identity))!, w.now())).toBe(true);
    expect(await w.store.get(w.identity)).toMatchObject({
      status: 'UNKNOWN',
      errorType: 'lease_expired',
      inFlightUntil: lease + WINDOW_MS,
    });
    w.advance(100);
    expect(await w.reconcile()).toBe('deferred');
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'unknown' });
    w.advance(lease + WINDOW_MS - w.now());
    expect(await w.reconcile()).toBe('found');
    expect(w.provider.ledger).toHaveLength(1);
  });

  it("a vanished executor's request landing at its window's last moment: a reconciler asking at every step never releases the key", async () => {
    const w = world();
    const lease = T0 + POLICY.executionTimeoutMs! + 1000;
    await w.store.claim(
      {
        ...w.identity,
        fingerprint: fingerprint(ARGS, DEFAULT_NON_BUSINESS_FIELDS),
        status: 'PROCESSING',
        ownerToken: randomUUID(),
        createdAt: T0,
        updatedAt: T0,
        leaseExpiresAt: lease,
        retainUntil: T0 + 3600_000,
        expiresAt: Math.floor((T0 + 3600_000) / 1000),
      },
      T0,
    );
    w.provider.send(w.key, lease + WINDOW_MS - 1 - T0); // sent at the claim, lands at the last moment of the window
    w.advance(lease - T0);
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'unknown' }); // a follower marks it
    const outcomes = new Set<string>();
    while (w.now() <= lease + WINDOW_MS) {
      outcomes.add(await w.reconcile());
      w.advance(100);
    }
    expect([...outcomes]).not.toContain('released');
    expect(w.provider.ledger).toHaveLength(1);
    expect(await w.call(mustNotRun)).toMatchObject({ outcome: 'succeeded', replayed: true });
  });

  it('once the window has passed, an absence releases the key and the retry runs once', async () => {
    const w = world();
    // The provider never books this one (it gave up on it): absent for good.
    expect(await w.call(w.pay(Number.POSITIVE_INFINITY))).toMatchObject({ outcome: 'unknown' });
    expect(await w.reconcile()).toBe('deferred');
    w.advance(WINDOW_MS);
    expect(await w.reconcile()).toBe('released');
    let runs = 0;
    expect(await w.call(async () => ((runs += 1), { result: { payment_id: 'pay-direct' } }))).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
    });
    expect(runs).toBe(1);
  });

  it('a provider that cannot be asked inside the window: deferred to its end, the attempts spent only after it', async () => {
    const w = world();
    await w.call(w.pay(Number.POSITIVE_INFINITY));
    const reconciler = new ReconcilerSteps({
      store: w.store,
      tools: new Map([
        [
          TOOL,
          {
            onAbsent: 'release' as const,
            inFlightWindowMs: WINDOW_MS,
            reconcile: async () => ({ kind: 'unreachable' as const, reason: 'down' }),
          },
        ],
      ]),
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      clock: w.now,
      maxAttempts: 2,
      backoffBaseMs: 100,
    });
    for (let i = 0; i < 3; i++) {
      const record = (await w.store.get(w.identity))!;
      w.advance(Math.max(0, record.nextCheckAt! - w.now()));
      if (w.now() >= record.inFlightUntil!) break;
      expect(await reconciler.check(record, w.now())).toBe('deferred');
      expect((await w.store.get(w.identity))!.reconcileAttempts ?? 0).toBe(0);
    }
    expect(await reconciler.check((await w.store.get(w.identity))!, w.now())).toBe('deferred');
    expect(await w.store.get(w.identity)).toMatchObject({ status: 'UNKNOWN', reconcileAttempts: 1 });
    const record = (await w.store.get(w.identity))!;
    w.advance(record.nextCheckAt! - w.now());
    expect(await reconciler.check(record, w.now())).toBe('needsReviewNew');
  });
});
