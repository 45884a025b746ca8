import { describe, expect, it } from 'vitest';
import {
  HOUR,
  identity,
  isQueryStore,
  nextQueryBase,
  processingRecord as processing,
  T0,
  unknownError,
  type SuiteContext,
} from './store-conformance-fixtures';
import { randomUUID } from 'node:crypto';
import type { IdempotencyRecord } from '../../core/state-machine';
import type { AttentionStatus, IdempotencyStore, RecordQueries } from '../persistence';

/** The store conformance suite's reads across records: the reconciler's and the review desk's queries, and a table shared with another store. */
export function describeQueries({ options, open }: SuiteContext): void {
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
      const mine = [await unknownIn(store, base, tool, base + 3), await unknownIn(store, base, tool, base + 4, theirs[0]!.idempotencyKey)];
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
}
