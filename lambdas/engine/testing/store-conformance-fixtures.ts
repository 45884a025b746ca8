import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { OwnershipLostError } from '../../core/errors';
import type { IdempotencyRecord, OperatorEvent, RecordState, TransitionEvent } from '../../core/state-machine';
import type { ExtraWrite, IdempotencyStore, RecordIdentity, RecordQueries, ReviewStore } from '../persistence';

/*
 * What the store conformance suite's parts share (store-conformance.ts puts them together): the records it writes,
 * every write of the port by the event it makes, and the stores and records each test starts from.
 */

/**
 * What `describeStoreConformance` runs on: the store under test, whether it has a review store and queries, and a neighbour store on the same table.
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

export const HOUR = 3600_000;
export const T0 = Date.UTC(2030, 0, 1);

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

export const identity = (r: IdempotencyRecord): RecordIdentity => ({ tenant: r.tenant, tool: r.tool, idempotencyKey: r.idempotencyKey });
/** A new claim of the same key by another executor. */
const processing = processingRecord;
export const rivalOf = (r: IdempotencyRecord) => processing(identity(r));
export const orderWrite = (id: string): ExtraWrite => ({ create: { key: { pk: `CONFORMANCE#${id}`, sk: 'ITEM' }, item: { id } } });
export const unknownError = { code: 'OUTCOME_UNKNOWN', message: 'timed out' };
/** The record as the one-request path commits it: settled at once, with the same times as a claim. */
export const settledAtOnce = (overrides: Partial<IdempotencyRecord> = {}) =>
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
export const WRITES: Record<Exclude<TransitionEvent, 'claim' | 'expire' | OperatorEvent>, WriteAttempt> = {
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

export const OPERATOR_EVENTS: readonly OperatorEvent[] = [
  'operator_settled_found',
  'operator_settled_absent',
  'operator_settled_absent_fail',
  'operator_recheck',
];
export const isReviewStore = (store: IdempotencyStore): store is IdempotencyStore & ReviewStore =>
  'decide' in store && 'reviewLog' in store;
export const isQueryStore = (store: IdempotencyStore): store is IdempotencyStore & RecordQueries =>
  'findAttention' in store && 'attentionPages' in store && 'countAttention' in store;
/** No record's expiry: an UNKNOWN or NEEDS_REVIEW record never frees its key by time (`expiresAt` reads as infinite). */
export const NEVER = Number.POSITIVE_INFINITY;
/**
 * A time before every record of the suite's earlier query tests (each takes a day before the last): records made
 * there are due before any other in a store shared by many tests, so a bounded query sees them first.
 */
let earliestBase = Date.UTC(2020, 0, 1);
export const nextQueryBase = () => (earliestBase -= 24 * HOUR);
export const operatorDecision = (event: OperatorEvent) =>
  event === 'operator_settled_found'
    ? { event, result: 1 }
    : event === 'operator_settled_absent_fail'
      ? { event, error: unknownError }
      : { event };

/** A record's states the port can reach, each made through the port; ABSENT: the key was never claimed. */
export const STATES: readonly RecordState[] = ['ABSENT', 'PROCESSING', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'NEEDS_REVIEW'];

/** What the suite's parts are given: the adapter's options and how each test gets a store and a record to start from. */
export interface SuiteContext {
  options: StoreConformanceOptions;
  /** The store under test, fresh for each test. */
  open: () => Promise<IdempotencyStore>;
  /** A store with one record moved to UNKNOWN by its owner. */
  unknownRecord: () => Promise<{ store: IdempotencyStore; record: IdempotencyRecord }>;
  /** A fresh record in `state`, as the store holds it (for ABSENT: the record a claim would have written). */
  recordIn: (store: IdempotencyStore, state: RecordState) => Promise<IdempotencyRecord>;
}

export function suiteContext(options: StoreConformanceOptions): SuiteContext {
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
  return { options, open, unknownRecord, recordIn };
}
