import { describe, expect, it } from 'vitest';
import {
  HOUR,
  identity,
  isReviewStore,
  NEVER,
  OPERATOR_EVENTS,
  operatorDecision,
  processingRecord as processing,
  rivalOf,
  settledAtOnce,
  STATES,
  T0,
  unknownError,
  WRITES,
  type SuiteContext,
} from './store-conformance-fixtures';
import { randomUUID } from 'node:crypto';
import { allows, retentionFromNow, type IdempotencyRecord, type TransitionEvent } from '../../core/state-machine';
import type { IdempotencyStore } from '../persistence';

/** The store conformance suite's state machine: the transition table decides every write; reconciliation; the expiry each write leaves. */
export function describeTransitions({ options, open, unknownRecord, recordIn }: SuiteContext): void {
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
}
