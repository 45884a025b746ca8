import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { OwnershipLostError, TransactionRejectedError } from '../../core/errors';
import {
  allows,
  keyIsFree,
  retentionFromNow,
  type IdempotencyRecord,
  type OperatorEvent,
  type RecordState,
  type TransitionEvent,
} from '../../core/state-machine';
import type { AttentionStatus, ExtraWrite, IdempotencyStore, RecordIdentity, RecordQueries, ReviewStore } from '../persistence';

/**
 * What `describeStoreConformance` runs on: the store under test, its review store and queries, and a neighbour store on the same table.
 * @public
 */
export interface StoreConformanceOptions {
  /** The store under test; called once per test. Records of different tests never share a key. */
  store: () => IdempotencyStore | Promise<IdempotencyStore>;
  /** The store also implements ReviewStore (the review workflow): its decisions are held to the table too. */
  reviewStore?: boolean;
  /**
   * The store also implements RecordQueries (the reconciler's and the review desk's): its answers are held to the
   * records it holds. The suite's records may share the store with other tests' (one table): the queries are checked
   * on records due before any other's.
   */
  queries?: boolean;
  /**
   * Another store on the same table that is someone else's (another `keyPrefix`: another gateway's upstream, another
   * endpoint): the suite checks that the two never read, count or settle each other's records, and that the same
   * tenant, tool and key in both are two records. Called once per test, after `store`.
   */
  neighbour?: () => IdempotencyStore | Promise<IdempotencyStore>;
}

const HOUR = 3600_000;
const T0 = Date.UTC(2030, 0, 1);

/**
 * A PROCESSING record as the engine claims it, on a new key: created at 2030-01-01T00:00Z with a lease of a minute,
 * replayed for an hour, expiring a day later. For a store's own tests beside the suite.
 */
export function processingRecord(overrides: Partial<IdempotencyRecord> = {}): IdempotencyRecord {
  const retainUntil = T0 + HOUR;
  return {
    tenant: 'tenant-a',
    tool: 'orders.create',
    idempotencyKey: `key-${randomUUID()}`,
    fingerprint: 'fp-1',
    status: 'PROCESSING',
    ownerToken: randomUUID(),
    createdAt: T0,
    updatedAt: T0,
    leaseExpiresAt: T0 + 60_000,
    retainUntil,
    expiresAt: Math.floor((retainUntil + 24 * HOUR) / 1000),
    ...overrides,
  };
}

const identity = (r: IdempotencyRecord): RecordIdentity => ({ tenant: r.tenant, tool: r.tool, idempotencyKey: r.idempotencyKey });
/** A new claim of the same key by another executor. */
const processing = processingRecord;
const rivalOf = (r: IdempotencyRecord) => processing(identity(r));
const orderWrite = (id: string): ExtraWrite => ({ create: { key: { pk: `CONFORMANCE#${id}`, sk: 'ITEM' }, item: { id } } });
const unknownError = { code: 'OUTCOME_UNKNOWN', message: 'timed out' };
/** The record as the one-request path commits it: settled at once, with the same times as a claim. */
const settledAtOnce = (overrides: Partial<IdempotencyRecord> = {}) =>
  processing({ status: 'SUCCEEDED', result: { order: 'o-1' }, ...overrides });

/** What one store write needs to be attempted on a record in any state, and whether the store applied it. */
type WriteAttempt = (store: IdempotencyStore, record: IdempotencyRecord, now: number) => Promise<boolean>;
const refusedAsOwnershipLost = async (write: Promise<void>) => {
  try {
    await write;
    return true;
  } catch (err) {
    if (err instanceof OwnershipLostError) return false;
    throw err;
  }
};

/**
 * Every write of the store port by the event it makes, each attempted with the fence of the record as read (its owner
 * token, lease and attempts): the suite expects it applied exactly when the transition table allows the event from
 * the record's state. A new event in the table fails the type check here until its write is listed.
 */
const WRITES: Record<Exclude<TransitionEvent, 'claim' | 'expire' | OperatorEvent>, WriteAttempt> = {
  complete: (store, r, now) => refusedAsOwnershipLost(store.settle(identity(r), r.ownerToken, { status: 'SUCCEEDED', result: 1 }, now)),
  fail: (store, r, now) => refusedAsOwnershipLost(store.settle(identity(r), r.ownerToken, { status: 'FAILED', error: unknownError }, now)),
  release: (store, r) => store.release(identity(r), r.ownerToken),
  uncertain: (store, r, now) =>
    store.markUnknown(
      identity(r),
      r.ownerToken,
      { error: unknownError, errorType: 'uncertain', nextCheckAt: now, inFlightUntil: now },
      now,
    ),
  lease_expired: (store, r, now) => store.expireLease(r, now, now),
  take_over: (store, r, now) => store.takeOver(identity(r), r.ownerToken, randomUUID(), now + 60_000, now),
  reconciled_found: (store, r, now) => store.reconcile(r, { event: 'reconciled_found', result: 1 }, now),
  reconciled_absent: (store, r, now) => store.reconcile(r, { event: 'reconciled_absent' }, now),
  reconciled_absent_fail: (store, r, now) => store.reconcile(r, { event: 'reconciled_absent_fail', error: unknownError }, now),
  reconcile_exhausted: (store, r, now) => store.reconcile(r, { event: 'reconcile_exhausted', error: unknownError }, now),
  reconcile_deferred: (store, r, now) => store.deferReconcile(r, now + 60_000, unknownError, now),
};

const OPERATOR_EVENTS: readonly OperatorEvent[] = [
  'operator_settled_found',
  'operator_settled_absent',
  'operator_settled_absent_fail',
  'operator_recheck',
];
const isReviewStore = (store: IdempotencyStore): store is IdempotencyStore & ReviewStore => 'decide' in store && 'reviewLog' in store;
const isQueryStore = (store: IdempotencyStore): store is IdempotencyStore & RecordQueries =>
  'findAttention' in store && 'attentionPages' in store && 'countAttention' in store;
/** No record's expiry: an UNKNOWN or NEEDS_REVIEW record never frees its key by time (`expiresAt` reads as infinite). */
const NEVER = Number.POSITIVE_INFINITY;
/**
 * A time before every record of the suite's earlier query tests (each takes a day before the last): records made
 * there are due before any other in a store shared by many tests, so a bounded query sees them first.
 */
let earliestBase = Date.UTC(2020, 0, 1);
const nextQueryBase = () => (earliestBase -= 24 * HOUR);
const operatorDecision = (event: OperatorEvent) =>
  event === 'operator_settled_found'
    ? { event, result: 1 }
    : event === 'operator_settled_absent_fail'
      ? { event, error: unknownError }
      : { event };

/** A record's states the port can reach, each made through the port; ABSENT: the key was never claimed. */
const STATES: readonly RecordState[] = ['ABSENT', 'PROCESSING', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'NEEDS_REVIEW'];

/**
 * What every adapter of the store port must do, as a vitest suite: call it at the top level of a test file with a
 * factory of your store. Each write is one transition of the state machine, fenced so that racing executors and
 * reconcilers never both win. The in-memory store and the DynamoDB adapter both pass it.
 * @public
 */
export function describeStoreConformance(name: string, options: StoreConformanceOptions): void {
  const open = async () => options.store();
  /** A store with one record moved to UNKNOWN by its owner. */
  const unknownRecord = async () => {
    const store = await open();
    const record = processing();
    await store.claim(record, T0);
    expect(
      await store.markUnknown(
        identity(record),
        record.ownerToken,
        { error: unknownError, errorType: 'uncertain', nextCheckAt: T0 + 5000, inFlightUntil: T0 + 5000 },
        T0 + 1000,
      ),
    ).toBe(true);
    return { store, record: (await store.get(identity(record)))! };
  };

  /** A fresh record in `state`, as the store holds it (for ABSENT: the record a claim would have written). */
  const recordIn = async (store: IdempotencyStore, state: RecordState): Promise<IdempotencyRecord> => {
    const record = processing();
    if (state === 'ABSENT') return record;
    await store.claim(record, T0);
    if (state === 'SUCCEEDED' || state === 'FAILED') {
      await store.settle(
        identity(record),
        record.ownerToken,
        state === 'SUCCEEDED' ? { status: state, result: 0 } : { status: state, error: unknownError },
        T0 + 1,
      );
    }
    if (state === 'UNKNOWN' || state === 'NEEDS_REVIEW') {
      await store.markUnknown(
        identity(record),
        record.ownerToken,
        { error: unknownError, errorType: 'uncertain', nextCheckAt: T0 + 1, inFlightUntil: T0 + 1 },
        T0 + 1,
      );
    }
    if (state === 'NEEDS_REVIEW')
      await store.reconcile((await store.get(identity(record)))!, { event: 'reconcile_exhausted', error: unknownError }, T0 + 2);
    const stored = await store.get(identity(record));
    expect(stored?.status).toBe(state);
    return stored!;
  };

  describe(`${name}: the idempotency store contract`, () => {
    describe('claim', () => {
      it('creates the PROCESSING record on a free key and reads back what was claimed', async () => {
        const store = await open();
        const record = processing({ traceId: 'trace-1' });
        expect(await store.claim(record, T0)).toEqual({ claimed: true });
        expect(await store.get(identity(record))).toEqual(record);
      });

      it("keeps tenants, tools and keys apart, tool names of MCP's charset included", async () => {
        const store = await open();
        const first = processing({ tool: 'createOrder' });
        await store.claim(first, T0);
        for (const other of [
          { ...first, tenant: 'tenant-b' },
          { ...first, tool: 'orders.create' },
          { ...first, tool: 'create-order_v2' },
        ]) {
          expect(await store.claim({ ...other, ownerToken: randomUUID() }, T0)).toEqual({ claimed: true });
        }
        expect((await store.get(identity(first)))?.ownerToken).toBe(first.ownerToken);
      });

      it('refuses a held key and returns the holder; a retried claim of the same owner counts as ours', async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        const rival = await store.claim({ ...record, ownerToken: randomUUID(), fingerprint: 'fp-2' }, T0 + 1);
        expect(rival).toMatchObject({
          claimed: false,
          existing: { ownerToken: record.ownerToken, fingerprint: 'fp-1', status: 'PROCESSING' },
        });
        expect(await store.claim(record, T0 + 2)).toMatchObject({ claimed: true });
      });

      it("frees a settled key by the tool's expiry policy: 'execute' at the end of retention, otherwise at the expiry", async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        await store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: { n: 1 } }, T0 + 10);
        const again = () => ({ ...record, ownerToken: randomUUID() });
        expect(await store.claim(again(), record.retainUntil - 1, { onExpired: 'execute' })).toMatchObject({ claimed: false });
        expect(await store.claim(again(), record.retainUntil, { onExpired: 'review' })).toMatchObject({ claimed: false });
        expect(await store.claim(again(), record.retainUntil)).toMatchObject({ claimed: false });
        expect(await store.claim(again(), record.expiresAt * 1000, { onExpired: 'review' })).toEqual({ claimed: true });

        const second = processing();
        await store.claim(second, T0);
        await store.settle(identity(second), second.ownerToken, { status: 'FAILED', error: { code: 'X', message: 'no' } }, T0 + 10);
        expect(await store.claim({ ...second, ownerToken: randomUUID() }, second.retainUntil, { onExpired: 'execute' })).toEqual({
          claimed: true,
        });
      });

      it("frees exactly the keys the core's rule (keyIsFree) frees, at each boundary and under each policy", async () => {
        const store = await open();
        // Retention ends off the second; the expiry (a review window) an hour later, on the second.
        const retainUntil = T0 + HOUR + 500;
        const expiresAt = Math.floor((retainUntil + HOUR) / 1000);
        const nows = [retainUntil - 1, retainUntil, retainUntil + 1, expiresAt * 1000 - 1, expiresAt * 1000, expiresAt * 1000 + 1];
        for (const status of ['SUCCEEDED', 'FAILED'] as const) {
          for (const onExpired of ['execute', 'review', undefined] as const) {
            for (const now of nows) {
              /** A key settled with `status` long ago, as the store holds it. */
              const settledKey = async () => {
                const record = processing({ retainUntil, expiresAt });
                await store.claim(record, T0);
                await store.settle(
                  identity(record),
                  record.ownerToken,
                  status === 'SUCCEEDED' ? { status, result: 1 } : { status, error: unknownError },
                  T0 + 1,
                );
                return (await store.get(identity(record)))!;
              };
              const free = keyIsFree(await settledKey(), now, onExpired);
              const { claimed } = await store.claim(rivalOf(await settledKey()), now, { onExpired });
              const { committed } = await store.commitOnce(settledAtOnce(identity(await settledKey())), now, { onExpired });
              expect({ status, onExpired, at: now - T0, claimed, committed }).toEqual({
                status,
                onExpired,
                at: now - T0,
                claimed: free,
                committed: free,
              });
            }
          }
        }
      });

      it('never frees an unsettled key by time', async () => {
        const { store, record } = await unknownRecord();
        const late = record.retainUntil + 365 * 24 * HOUR;
        for (const onExpired of ['execute', 'review'] as const) {
          expect(await store.claim(rivalOf(record), late, { onExpired })).toMatchObject({ claimed: false });
        }
      });
    });

    describe('settle', () => {
      it('moves the owned PROCESSING record to SUCCEEDED or FAILED with what replays', async () => {
        const store = await open();
        const ok = processing();
        await store.claim(ok, T0);
        await store.settle(identity(ok), ok.ownerToken, { status: 'SUCCEEDED', result: { order: 'o-1' } }, T0 + 5);
        expect(await store.get(identity(ok))).toMatchObject({ status: 'SUCCEEDED', result: { order: 'o-1' }, updatedAt: T0 + 5 });
        const bad = processing();
        await store.claim(bad, T0);
        await store.settle(
          identity(bad),
          bad.ownerToken,
          { status: 'FAILED', error: { code: 'DECLINED', message: 'no' }, errorType: 'terminal' },
          T0 + 5,
        );
        expect(await store.get(identity(bad))).toMatchObject({ status: 'FAILED', error: { code: 'DECLINED' }, errorType: 'terminal' });
      });

      it('is fenced on the owner: another owner, or a record no longer PROCESSING, gets OwnershipLostError', async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        await expect(store.settle(identity(record), randomUUID(), { status: 'SUCCEEDED', result: 1 }, T0 + 1)).rejects.toBeInstanceOf(
          OwnershipLostError,
        );
        await store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 1);
        await expect(store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: 2 }, T0 + 2)).rejects.toBeInstanceOf(
          OwnershipLostError,
        );
        expect((await store.get(identity(record)))?.result).toBe(1);
      });

      it("commits the tool's writes with the record, or nothing when one of them exists already", async () => {
        const store = await open();
        const shared = `item-${randomUUID()}`;
        const first = processing();
        await store.claim(first, T0);
        await store.settle(identity(first), first.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 1, [orderWrite(shared)]);
        const second = processing();
        await store.claim(second, T0);
        const fresh = `item-${randomUUID()}`;
        await expect(
          store.settle(identity(second), second.ownerToken, { status: 'SUCCEEDED', result: 2 }, T0 + 1, [
            orderWrite(fresh),
            orderWrite(shared),
          ]),
        ).rejects.toBeInstanceOf(TransactionRejectedError);
        expect((await store.get(identity(second)))?.status).toBe('PROCESSING');
        // The refused settlement created nothing: its fresh item is still free for a later one.
        await store.settle(identity(second), second.ownerToken, { status: 'SUCCEEDED', result: 2 }, T0 + 2, [orderWrite(fresh)]);
        expect((await store.get(identity(second)))?.status).toBe('SUCCEEDED');
      });
    });

    describe('release', () => {
      it('deletes the owned PROCESSING record so the key executes again; anyone else is refused', async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        expect(await store.release(identity(record), randomUUID())).toBe(false);
        expect(await store.release(identity(record), record.ownerToken)).toBe(true);
        expect(await store.get(identity(record))).toBeUndefined();
        expect(await store.claim({ ...record, ownerToken: randomUUID() }, T0 + 1)).toEqual({ claimed: true });
      });
    });

    describe('leases', () => {
      it('markUnknown: only the owner moves PROCESSING to UNKNOWN, due for a check, with its in-flight window', async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        const details = { error: unknownError, errorType: 'uncertain' as const, nextCheckAt: T0 + 5000, inFlightUntil: T0 + 9000 };
        expect(await store.markUnknown(identity(record), randomUUID(), details, T0 + 1)).toBe(false);
        expect(await store.markUnknown(identity(record), record.ownerToken, details, T0 + 1)).toBe(true);
        expect(await store.get(identity(record))).toMatchObject({
          status: 'UNKNOWN',
          nextCheckAt: T0 + 5000,
          inFlightUntil: T0 + 9000,
          error: unknownError,
          errorType: 'uncertain',
        });
        expect(await store.markUnknown(identity(record), record.ownerToken, details, T0 + 2)).toBe(false);
      });

      it('takeOver: a new owner only once the lease has passed; the old owner is then fenced out', async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        const next = randomUUID();
        expect(await store.takeOver(identity(record), record.ownerToken, next, T0 + 120_000, record.leaseExpiresAt - 1)).toBe(false);
        expect(await store.takeOver(identity(record), record.ownerToken, next, T0 + 120_000, record.leaseExpiresAt)).toBe(true);
        expect(await store.get(identity(record))).toMatchObject({ status: 'PROCESSING', ownerToken: next, leaseExpiresAt: T0 + 120_000 });
        await expect(
          store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 61_000),
        ).rejects.toBeInstanceOf(OwnershipLostError);
        expect(await store.takeOver(identity(record), record.ownerToken, randomUUID(), T0 + 200_000, T0 + 130_000)).toBe(false);
      });

      it('expireLease: a passed lease, as read, becomes UNKNOWN due now with its in-flight window; a live or renewed lease stays', async () => {
        const store = await open();
        const record = processing();
        await store.claim(record, T0);
        expect(await store.expireLease(record, record.leaseExpiresAt - 1, record.leaseExpiresAt + 5000)).toBe(false);
        const renewed = randomUUID();
        await store.takeOver(identity(record), record.ownerToken, renewed, T0 + 120_000, record.leaseExpiresAt);
        expect(await store.expireLease(record, T0 + 200_000, T0 + 205_000)).toBe(false);
        const current = (await store.get(identity(record)))!;
        expect(await store.expireLease(current, T0 + 120_000, T0 + 125_000)).toBe(true);
        expect(await store.get(identity(record))).toMatchObject({
          status: 'UNKNOWN',
          errorType: 'lease_expired',
          nextCheckAt: T0 + 120_000,
          inFlightUntil: T0 + 125_000,
        });
        expect(await store.expireLease(current, T0 + 120_001, T0 + 125_000)).toBe(false);
      });
    });

    describe('commitOnce (the one-request path)', () => {
      it("commits the settled record and the tool's writes on a free key", async () => {
        const store = await open();
        const record = settledAtOnce();
        const item = `item-${randomUUID()}`;
        expect(await store.commitOnce(record, T0, { onExpired: 'execute' }, [orderWrite(item)])).toEqual({ committed: true });
        expect(await store.get(identity(record))).toEqual(record);
        // The item committed with it: another transaction creating it is refused, and commits nothing.
        const other = settledAtOnce();
        await expect(store.commitOnce(other, T0, {}, [orderWrite(item)])).rejects.toBeInstanceOf(TransactionRejectedError);
        expect(await store.get(identity(other))).toBeUndefined();
      });

      it('on a held key returns the holder and writes nothing; a retried commit of the same owner counts as committed', async () => {
        const store = await open();
        for (const holder of ['PROCESSING', 'SUCCEEDED', 'UNKNOWN', 'NEEDS_REVIEW'] as const) {
          const held = await recordIn(store, holder);
          const item = `item-${randomUUID()}`;
          const rival = settledAtOnce({ ...identity(held), result: { order: 'o-2' } });
          expect(await store.commitOnce(rival, T0 + 10, { onExpired: 'execute' }, [orderWrite(item)]), holder).toEqual({
            committed: false,
            existing: await store.get(identity(held)),
          });
          expect(await store.get(identity(held)), holder).toEqual(held);
          // Its item was not written: a later transaction still creates it.
          const later = settledAtOnce();
          expect(await store.commitOnce(later, T0, {}, [orderWrite(item)]), holder).toEqual({ committed: true });
        }
        const mine = settledAtOnce();
        await store.commitOnce(mine, T0);
        expect(await store.commitOnce(mine, T0 + 1)).toEqual({ committed: true });
      });

      it('returns the record to a call with other arguments (a conflict), writing nothing', async () => {
        const store = await open();
        const first = settledAtOnce();
        await store.commitOnce(first, T0);
        const conflicting = settledAtOnce({ ...identity(first), fingerprint: 'fp-2', result: { order: 'o-2' } });
        expect(await store.commitOnce(conflicting, T0 + 1, { onExpired: 'execute' })).toEqual({ committed: false, existing: first });
        expect(await store.get(identity(first))).toEqual(first);
      });

      it("frees an expired key by the same rule as claim: 'execute' at the end of retention, otherwise at the expiry", async () => {
        const store = await open();
        const first = settledAtOnce();
        await store.commitOnce(first, T0);
        const again = () => settledAtOnce({ ...identity(first), result: { order: 'o-2' } });
        expect(await store.commitOnce(again(), first.retainUntil - 1, { onExpired: 'execute' })).toMatchObject({ committed: false });
        expect(await store.commitOnce(again(), first.retainUntil, { onExpired: 'review' })).toMatchObject({ committed: false });
        expect(await store.commitOnce(again(), first.retainUntil)).toMatchObject({ committed: false });
        const second = again();
        expect(await store.commitOnce(second, first.retainUntil, { onExpired: 'execute' })).toEqual({ committed: true });
        expect(await store.get(identity(first))).toEqual(second);
        const third = again();
        expect(await store.commitOnce(third, second.expiresAt * 1000, { onExpired: 'review' })).toEqual({ committed: true });
        expect((await store.get(identity(first)))?.ownerToken).toBe(third.ownerToken);
      });
    });

    describe('the transition table (lambdas/core/state-machine.ts) decides every write', () => {
      /** Late enough that every lease has passed and no settled record is free yet under the default policy. */
      const late = T0 + 30 * 60_000;
      it.each(Object.entries(WRITES))(
        '%s: applied exactly from the states the table allows it from; refused (nothing written) from the others',
        async (event, attempt) => {
          const store = await open();
          for (const state of STATES) {
            const record = await recordIn(store, state);
            const before = await store.get(identity(record));
            const applied = await attempt(store, record, late);
            expect({ state, applied }).toEqual({ state, applied: allows(state, event as TransitionEvent) });
            if (!applied) expect(await store.get(identity(record)), `${event} from ${state}`).toEqual(before);
          }
        },
      );

      it('claim and commitOnce: applied on an absent key only (a settled key once it expired: see above)', async () => {
        const store = await open();
        for (const state of STATES) {
          const claimed = (await store.claim(rivalOf(await recordIn(store, state)), T0 + 2)).claimed;
          const committed = (await store.commitOnce(settledAtOnce(identity(await recordIn(store, state))), T0 + 2)).committed;
          expect({ state, claimed, committed }).toEqual({ state, claimed: allows(state, 'claim'), committed: allows(state, 'claim') });
        }
      });

      it.skipIf(!options.reviewStore).each(OPERATOR_EVENTS)(
        "%s (review stores): applied exactly from the table's states, refused from the others",
        async (event) => {
          const store = await open();
          if (!isReviewStore(store)) throw new Error('reviewStore: true, but the store has no decide/reviewLog');
          for (const state of STATES.filter((s) => s !== 'ABSENT')) {
            const record = await recordIn(store, state);
            const entry = {
              by: 'conformance',
              at: late,
              action: event,
              reason: 'checked by hand',
              from: record.status,
              to: 'ABSENT' as const,
            };
            let applied: boolean;
            try {
              applied = await store.decide(record, await store.reviewLog(identity(record)), operatorDecision(event), entry, late);
            } catch (err) {
              // The table refuses before anything is sent.
              if ((err as Error).name !== 'IllegalTransitionError') throw err;
              applied = false;
            }
            expect({ state, applied }).toEqual({ state, applied: allows(state, event) });
            if (!applied) expect(await store.get(identity(record))).toEqual(record);
          }
        },
      );
    });

    describe('reconciliation', () => {
      it('found: SUCCEEDED with the result, replayed for a full retention from now', async () => {
        const { store, record } = await unknownRecord();
        const now = T0 + 2 * HOUR;
        expect(await store.reconcile(record, { event: 'reconciled_found', result: { paid: true } }, now)).toBe(true);
        const settled = await store.get(identity(record));
        expect(settled).toMatchObject({ status: 'SUCCEEDED', result: { paid: true }, retainUntil: now + HOUR });
        expect(settled?.error).toBeUndefined();
        expect(await store.claim(rivalOf(record), now + HOUR - 1, { onExpired: 'execute' })).toMatchObject({ claimed: false });
      });

      it('absent: the key is released; absent with the fail policy: FAILED', async () => {
        const released = await unknownRecord();
        expect(await released.store.reconcile(released.record, { event: 'reconciled_absent' }, T0 + 10_000)).toBe(true);
        expect(await released.store.get(identity(released.record))).toBeUndefined();
        const failed = await unknownRecord();
        const error = { code: 'NOT_FOUND', message: 'never happened' };
        expect(await failed.store.reconcile(failed.record, { event: 'reconciled_absent_fail', error }, T0 + 10_000)).toBe(true);
        expect(await failed.store.get(identity(failed.record))).toMatchObject({ status: 'FAILED', error, errorType: 'terminal' });
      });

      it('exhausted: NEEDS_REVIEW, which no claim frees', async () => {
        const { store, record } = await unknownRecord();
        const error = { code: 'RECONCILE_EXHAUSTED', message: 'gave up' };
        expect(await store.reconcile(record, { event: 'reconcile_exhausted', error }, T0 + 10_000)).toBe(true);
        expect(await store.get(identity(record))).toMatchObject({
          status: 'NEEDS_REVIEW',
          reconcileAttempts: 1,
          errorType: 'reconcile_exhausted',
        });
        expect(await store.claim(rivalOf(record), T0 + 1000 * 24 * HOUR, { onExpired: 'execute' })).toMatchObject({
          claimed: false,
        });
      });

      it('is fenced on the version read: after a deferral, a reconciler holding the older read loses', async () => {
        const { store, record } = await unknownRecord();
        const reason = { code: 'DOWNSTREAM_UNAVAILABLE', message: 'try later' };
        expect(await store.deferReconcile(record, T0 + 60_000, reason, T0 + 10_000)).toBe(true);
        expect(await store.get(identity(record))).toMatchObject({
          status: 'UNKNOWN',
          reconcileAttempts: 1,
          nextCheckAt: T0 + 60_000,
          error: reason,
        });
        expect(await store.deferReconcile(record, T0 + 90_000, reason, T0 + 10_001)).toBe(false);
        expect(await store.reconcile(record, { event: 'reconciled_found', result: 1 }, T0 + 10_002)).toBe(false);
        const current = (await store.get(identity(record)))!;
        expect(await store.reconcile(current, { event: 'reconciled_found', result: 1 }, T0 + 70_000)).toBe(true);
        expect(await store.reconcile(current, { event: 'reconciled_absent' }, T0 + 70_001)).toBe(false);
      });

      it('a deferral inside the in-flight window moves the next check and leaves the attempts as they are', async () => {
        const { store, record } = await unknownRecord();
        const reason = { code: 'OUTCOME_UNKNOWN', message: 'not found yet; a request may still land' };
        expect(await store.deferReconcile(record, T0 + 30_000, reason, T0 + 10_000, { countsAsAttempt: false })).toBe(true);
        const current = (await store.get(identity(record)))!;
        expect(current).toMatchObject({ status: 'UNKNOWN', nextCheckAt: T0 + 30_000, error: reason });
        expect(current.reconcileAttempts ?? 0).toBe(0);
        expect(await store.reconcile(current, { event: 'reconciled_found', result: 1 }, T0 + 30_000)).toBe(true);
      });
    });

    describe('the expiry (TTL) each write leaves on a record', () => {
      const expiryOf = async (store: IdempotencyStore, record: IdempotencyRecord) => {
        const stored = await store.get(identity(record));
        return stored && { retainUntil: stored.retainUntil, expiresAt: stored.expiresAt };
      };
      const claimed = (record: IdempotencyRecord) => ({ retainUntil: record.retainUntil, expiresAt: record.expiresAt });

      it('claim, commitOnce, settle and takeOver keep the expiry the record was written with', async () => {
        const store = await open();
        const ok = processing();
        await store.claim(ok, T0);
        expect(await expiryOf(store, ok)).toEqual(claimed(ok));
        expect(await store.takeOver(identity(ok), ok.ownerToken, randomUUID(), T0 + 120_000, ok.leaseExpiresAt)).toBe(true);
        expect(await expiryOf(store, ok), 'takeOver').toEqual(claimed(ok));
        const owner = (await store.get(identity(ok)))!.ownerToken;
        await store.settle(identity(ok), owner, { status: 'SUCCEEDED', result: 1 }, T0 + 2 * HOUR);
        expect(await expiryOf(store, ok), 'settle').toEqual(claimed(ok));
        const bad = processing();
        await store.claim(bad, T0);
        await store.settle(identity(bad), bad.ownerToken, { status: 'FAILED', error: unknownError }, T0 + 1);
        expect(await expiryOf(store, bad), 'settle (FAILED)').toEqual(claimed(bad));
        const once = settledAtOnce();
        await store.commitOnce(once, T0);
        expect(await expiryOf(store, once), 'commitOnce').toEqual(claimed(once));
      });

      it('markUnknown and expireLease take it away: an UNKNOWN record never frees its key by time', async () => {
        const store = await open();
        const uncertain = processing();
        await store.claim(uncertain, T0);
        await store.markUnknown(
          identity(uncertain),
          uncertain.ownerToken,
          { error: unknownError, errorType: 'uncertain', nextCheckAt: T0 + 1, inFlightUntil: T0 + 1 },
          T0 + 1,
        );
        expect(await expiryOf(store, uncertain), 'markUnknown').toEqual({ retainUntil: uncertain.retainUntil, expiresAt: NEVER });
        const vanished = processing();
        await store.claim(vanished, T0);
        expect(await store.expireLease(vanished, vanished.leaseExpiresAt, vanished.leaseExpiresAt)).toBe(true);
        expect(await expiryOf(store, vanished), 'expireLease').toEqual({ retainUntil: vanished.retainUntil, expiresAt: NEVER });
      });

      it('a deferred check and reconcile_exhausted leave none: a record parked for review never expires', async () => {
        const { store, record } = await unknownRecord();
        expect(await store.deferReconcile(record, T0 + 60_000, unknownError, T0 + 10_000)).toBe(true);
        expect(await expiryOf(store, record), 'deferReconcile').toEqual({ retainUntil: record.retainUntil, expiresAt: NEVER });
        expect(
          await store.reconcile((await store.get(identity(record)))!, { event: 'reconcile_exhausted', error: unknownError }, T0 + 70_000),
        ).toBe(true);
        expect(await expiryOf(store, record), 'reconcile_exhausted').toEqual({ retainUntil: record.retainUntil, expiresAt: NEVER });
      });

      it.each(['reconciled_found', 'reconciled_absent_fail'] as const)(
        'reconcile %s: a full retention from now, and the expiry with it (retentionFromNow)',
        async (event) => {
          const { store, record } = await unknownRecord();
          const now = T0 + 2 * HOUR + 500;
          const outcome = event === 'reconciled_found' ? { event, result: 1 } : { event, error: unknownError };
          expect(await store.reconcile(record, outcome, now)).toBe(true);
          expect(await expiryOf(store, record)).toEqual(retentionFromNow(record, now));
        },
      );

      it.skipIf(!options.reviewStore).each(OPERATOR_EVENTS.filter((e) => e !== 'operator_settled_absent'))(
        'decide %s (review stores): settled, a full retention from now with its expiry; rechecked, none',
        async (event) => {
          const store = await open();
          if (!isReviewStore(store)) throw new Error('reviewStore: true, but the store has no decide/reviewLog');
          const record = await recordIn(store, 'NEEDS_REVIEW');
          const now = T0 + 3 * HOUR + 250;
          const entry = {
            by: 'conformance',
            at: now,
            action: event,
            reason: 'checked by hand',
            from: record.status,
            to: 'ABSENT' as const,
          };
          expect(await store.decide(record, await store.reviewLog(identity(record)), operatorDecision(event), entry, now)).toBe(true);
          expect(await expiryOf(store, record)).toEqual(
            event === 'operator_recheck' ? { retainUntil: record.retainUntil, expiresAt: NEVER } : retentionFromNow(record, now),
          );
        },
      );
    });

    describe.skipIf(!options.queries)('the queries (RecordQueries: the reconciler, the review desk)', () => {
      const openQueryStore = async () => {
        const store = await open();
        if (!isQueryStore(store)) throw new Error('queries: true, but the store has no findAttention/attentionPages/countAttention');
        store.assertQueryable('the conformance suite');
        return store;
      };
      /** A record of `tool` claimed at `base`, its lease ending at `leaseEnd`. */
      const claimedAt = async (store: IdempotencyStore, base: number, tool: string, leaseEnd = base + 60_000) => {
        const record = processing({
          tool,
          createdAt: base,
          updatedAt: base,
          leaseExpiresAt: leaseEnd,
          retainUntil: base + HOUR,
          expiresAt: Math.floor((T0 + HOUR) / 1000),
        });
        expect((await store.claim(record, base)).claimed).toBe(true);
        return record;
      };
      /** A record of `tool` made UNKNOWN by its owner at `base`, next checked at `nextCheckAt`. */
      const unknownAt = async (store: IdempotencyStore, base: number, tool: string, nextCheckAt: number) => {
        const record = await claimedAt(store, base, tool);
        const details = { error: unknownError, errorType: 'uncertain' as const, nextCheckAt, inFlightUntil: nextCheckAt };
        expect(await store.markUnknown(identity(record), record.ownerToken, details, base + 1)).toBe(true);
        return (await store.get(identity(record)))!;
      };
      const newTool = () => `conformance.q${randomUUID().slice(0, 8)}`;
      const keys = (records: IdempotencyRecord[]) => records.map((r) => r.idempotencyKey);
      const due = (store: RecordQueries, status: AttentionStatus, dueBy: number) => store.findAttention(status, { dueBy, limit: 100 });

      it('findAttention: the records in a status due by a time, the earliest due first, at most the limit, as get reads them', async () => {
        const store = await openQueryStore();
        const base = nextQueryBase();
        const tool = newTool();
        const last = await unknownAt(store, base, tool, base + 3000);
        const first = await unknownAt(store, base, tool, base + 1000);
        const second = await unknownAt(store, base, tool, base + 2000);
        await claimedAt(store, base, tool, base + 500);
        expect(keys(await due(store, 'UNKNOWN', base + 2500))).toEqual(keys([first, second]));
        expect(await due(store, 'UNKNOWN', base + 3000)).toEqual([first, second, last]);
        expect(keys(await store.findAttention('UNKNOWN', { limit: 2 }))).toEqual(keys([first, second]));
        // Settled: no longer found.
        expect(await store.reconcile(first, { event: 'reconciled_found', result: 1 }, base + 5000)).toBe(true);
        expect(keys(await due(store, 'UNKNOWN', base + 3000))).toEqual(keys([second, last]));
      });

      it('findAttention: a lease is due at its end (a takeover moves it), an UNKNOWN record at its next check, a parked one at its last update', async () => {
        const store = await openQueryStore();
        const base = nextQueryBase();
        const record = await claimedAt(store, base, newTool(), base + 1000);
        expect(await due(store, 'PROCESSING', base + 999)).toEqual([]);
        expect(keys(await due(store, 'PROCESSING', base + 1000))).toEqual(keys([record]));
        const owner = randomUUID();
        expect(await store.takeOver(identity(record), record.ownerToken, owner, base + 5000, base + 1000)).toBe(true);
        expect(await due(store, 'PROCESSING', base + 4999)).toEqual([]);
        expect(keys(await due(store, 'PROCESSING', base + 5000))).toEqual(keys([record]));
        const details = { error: unknownError, errorType: 'uncertain' as const, nextCheckAt: base + 7000, inFlightUntil: base + 7000 };
        expect(await store.markUnknown(identity(record), owner, details, base + 6000)).toBe(true);
        expect(await due(store, 'PROCESSING', base + 10_000)).toEqual([]);
        expect(await due(store, 'UNKNOWN', base + 6999)).toEqual([]);
        expect(keys(await due(store, 'UNKNOWN', base + 7000))).toEqual(keys([record]));
        const unknown = (await store.get(identity(record)))!;
        expect(await store.deferReconcile(unknown, base + 9000, unknownError, base + 8000)).toBe(true);
        expect(await due(store, 'UNKNOWN', base + 8999)).toEqual([]);
        expect(
          await store.reconcile((await store.get(identity(record)))!, { event: 'reconcile_exhausted', error: unknownError }, base + 9500),
        ).toBe(true);
        expect(await due(store, 'UNKNOWN', base + 10_000)).toEqual([]);
        expect(await due(store, 'NEEDS_REVIEW', base + 9499)).toEqual([]);
        expect(await due(store, 'NEEDS_REVIEW', base + 9500)).toEqual([await store.get(identity(record))]);
      });

      it('attentionPages: every record in a status, a page of at most pageSize at a time; with dueBy, only those due', async () => {
        const store = await openQueryStore();
        const base = nextQueryBase();
        const tool = newTool();
        const made: IdempotencyRecord[] = [];
        for (let i = 1; i <= 5; i++) made.push(await unknownAt(store, base, tool, base + i));
        const listed = async (query: { pageSize: number; dueBy?: number }) => {
          const found: IdempotencyRecord[] = [];
          for await (const page of store.attentionPages('UNKNOWN', query)) {
            expect(page.length).toBeLessThanOrEqual(query.pageSize);
            found.push(...page);
          }
          expect(found.filter((r) => r.status !== 'UNKNOWN')).toEqual([]);
          return keys(found.filter((r) => r.tool === tool)).sort();
        };
        expect(await listed({ pageSize: 2, dueBy: base + 4 })).toEqual(keys(made.slice(0, 4)).sort());
        expect(await listed({ pageSize: 100 })).toEqual(keys(made).sort());
      });

      it('countAttention: how many records are in a status', async () => {
        const store = await openQueryStore();
        const base = nextQueryBase();
        const counts = async () => ({
          PROCESSING: await store.countAttention('PROCESSING'),
          UNKNOWN: await store.countAttention('UNKNOWN'),
          NEEDS_REVIEW: await store.countAttention('NEEDS_REVIEW'),
        });
        const before = await counts();
        const record = await claimedAt(store, base, newTool());
        expect(await counts()).toEqual({ ...before, PROCESSING: before.PROCESSING + 1 });
        await store.markUnknown(
          identity(record),
          record.ownerToken,
          { error: unknownError, errorType: 'uncertain', nextCheckAt: base, inFlightUntil: base },
          base + 1,
        );
        expect(await counts()).toEqual({ ...before, UNKNOWN: before.UNKNOWN + 1 });
        await store.reconcile((await store.get(identity(record)))!, { event: 'reconcile_exhausted', error: unknownError }, base + 2);
        expect(await counts()).toEqual({ ...before, NEEDS_REVIEW: before.NEEDS_REVIEW + 1 });
      });
    });

    describe.skipIf(!options.neighbour)("a shared table: another store's records are never this store's", () => {
      const openBoth = async () => {
        const store = await open();
        const other = await options.neighbour!();
        return { store, other };
      };
      const unknownIn = async (store: IdempotencyStore, base: number, tool: string, nextCheckAt: number, key?: string) => {
        const record = processing({
          tool,
          createdAt: base,
          updatedAt: base,
          leaseExpiresAt: base + 60_000,
          retainUntil: base + HOUR,
          ...(key ? { idempotencyKey: key } : {}),
        });
        expect((await store.claim(record, base)).claimed).toBe(true);
        const details = { error: unknownError, errorType: 'uncertain' as const, nextCheckAt, inFlightUntil: nextCheckAt };
        expect(await store.markUnknown(identity(record), record.ownerToken, details, base + 1)).toBe(true);
        return (await store.get(identity(record)))!;
      };

      it('the same tenant, tool and key in both are two records: each claims, reads and settles its own', async () => {
        const { store, other } = await openBoth();
        const mine = processing({ fingerprint: 'fp-mine' });
        const theirs = processing({ ...identity(mine), fingerprint: 'fp-theirs' });
        expect((await store.claim(mine, T0)).claimed).toBe(true);
        expect((await other.claim(theirs, T0)).claimed).toBe(true);
        expect((await store.get(identity(mine)))?.fingerprint).toBe('fp-mine');
        expect((await other.get(identity(mine)))?.fingerprint).toBe('fp-theirs');
        await store.settle(identity(mine), mine.ownerToken, { status: 'SUCCEEDED', result: 'mine' }, T0 + 1);
        expect((await other.get(identity(mine)))?.status).toBe('PROCESSING');
        expect(await other.release(identity(theirs), theirs.ownerToken)).toBe(true);
        expect((await store.get(identity(mine)))?.result).toBe('mine');
      });

      it("the queries find, list and count only the store's own records, even when another's are due first", async () => {
        const { store, other } = await openBoth();
        if (!isQueryStore(store) || !isQueryStore(other)) throw new Error('neighbour: both stores must answer the queries (queries: true)');
        const base = nextQueryBase();
        const tool = `conformance.n${randomUUID().slice(0, 8)}`;
        const counts = async (s: RecordQueries) => ({
          UNKNOWN: await s.countAttention('UNKNOWN'),
          NEEDS_REVIEW: await s.countAttention('NEEDS_REVIEW'),
        });
        const [mineBefore, theirsBefore] = [await counts(store), await counts(other)];
        // Theirs are due before ours: a query bounded to two must still find ours, not read theirs and skip them.
        const theirs = [await unknownIn(other, base, tool, base + 1), await unknownIn(other, base, tool, base + 2)];
        const mine = [
          await unknownIn(store, base, tool, base + 3),
          await unknownIn(store, base, tool, base + 4, theirs[0]!.idempotencyKey),
        ];
        const keysOf = (records: IdempotencyRecord[]) => records.filter((r) => r.tool === tool).map((r) => r.idempotencyKey);
        expect(keysOf(await store.findAttention('UNKNOWN', { dueBy: base + 10, limit: 2 }))).toEqual(keysOf(mine));
        expect(keysOf(await other.findAttention('UNKNOWN', { dueBy: base + 10, limit: 2 }))).toEqual(keysOf(theirs));
        const listed: IdempotencyRecord[] = [];
        for await (const page of store.attentionPages('UNKNOWN', { pageSize: 100, dueBy: base + 10 })) listed.push(...page);
        expect(keysOf(listed).sort()).toEqual(keysOf(mine).sort());
        expect(await counts(store)).toEqual({ ...mineBefore, UNKNOWN: mineBefore.UNKNOWN + 2 });
        expect(await counts(other)).toEqual({ ...theirsBefore, UNKNOWN: theirsBefore.UNKNOWN + 2 });
        // Parking its own record leaves the other store's record of the same key as it was.
        expect(await store.reconcile(mine[1]!, { event: 'reconcile_exhausted', error: unknownError }, base + 5)).toBe(true);
        expect(await counts(other)).toEqual({ ...theirsBefore, UNKNOWN: theirsBefore.UNKNOWN + 2 });
        expect(await other.get(identity(theirs[0]!))).toEqual(theirs[0]);
        expect(await counts(store)).toEqual({ UNKNOWN: mineBefore.UNKNOWN + 1, NEEDS_REVIEW: mineBefore.NEEDS_REVIEW + 1 });
      });
    });
  });
}
