import { describe, expect, it } from 'vitest';
import {
  allows,
  appendReviewEntry,
  REVIEW_LOG_MAX_BYTES,
  REVIEW_LOG_MAX_ENTRIES,
  REVIEW_REASON_MAX_CHARS,
  type ReviewEntry,
  decideForExisting,
  IllegalTransitionError,
  keyExpiryRule,
  keyIsFree,
  storedStatesAllowing,
  transition,
  type ExpiryPolicy,
  type IdempotencyRecord,
  type RecordState,
  type RecordStatus,
  type TransitionEvent,
} from './state-machine';

const STATES: RecordState[] = ['ABSENT', 'PROCESSING', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'NEEDS_REVIEW'];
const EVENTS: TransitionEvent[] = [
  'claim',
  'complete',
  'fail',
  'release',
  'uncertain',
  'lease_expired',
  'take_over',
  'reconciled_found',
  'reconciled_absent',
  'reconciled_absent_fail',
  'reconcile_exhausted',
  'reconcile_deferred',
  'expire',
  'operator_settled_found',
  'operator_settled_absent',
  'operator_settled_absent_fail',
  'operator_recheck',
];
const OPERATOR_EVENTS = EVENTS.filter((event) => event.startsWith('operator_'));

/** A person may settle (or send back for another check) only what the reconciler could not settle. */
const BY_OPERATOR = {
  operator_settled_found: 'SUCCEEDED',
  operator_settled_absent: 'ABSENT',
  operator_settled_absent_fail: 'FAILED',
  operator_recheck: 'UNKNOWN',
} as const;

/** The lifecycle the issue describes, written out independently of the implementation's table. */
const LEGAL: Partial<Record<RecordState, Partial<Record<TransitionEvent, RecordState>>>> = {
  ABSENT: { claim: 'PROCESSING' },
  PROCESSING: {
    complete: 'SUCCEEDED',
    fail: 'FAILED',
    release: 'ABSENT',
    uncertain: 'UNKNOWN',
    lease_expired: 'UNKNOWN',
    take_over: 'PROCESSING',
  },
  UNKNOWN: {
    reconciled_found: 'SUCCEEDED',
    reconciled_absent: 'ABSENT',
    reconciled_absent_fail: 'FAILED',
    reconcile_exhausted: 'NEEDS_REVIEW',
    reconcile_deferred: 'UNKNOWN',
    ...BY_OPERATOR,
  },
  SUCCEEDED: { expire: 'ABSENT' },
  FAILED: { expire: 'ABSENT' },
  NEEDS_REVIEW: { ...BY_OPERATOR },
};

describe('transition', () => {
  const cases = STATES.flatMap((from) => EVENTS.map((event) => [from, event, LEGAL[from]?.[event]] as const));

  it.each(cases.filter(([, , to]) => to))('%s --%s--> %s', (from, event, to) => {
    expect(transition(from, event)).toBe(to);
  });

  it.each(cases.filter(([, , to]) => !to))('%s --%s--> refused', (from, event) => {
    expect(() => transition(from, event)).toThrow(IllegalTransitionError);
  });

  it('never leaves a settled outcome for another outcome, and only a person moves a record out of NEEDS_REVIEW', () => {
    for (const event of EVENTS) {
      for (const from of ['SUCCEEDED', 'FAILED'] as const) {
        if (event !== 'expire') expect(() => transition(from, event)).toThrow(IllegalTransitionError);
      }
      if (!OPERATOR_EVENTS.includes(event)) expect(() => transition('NEEDS_REVIEW', event)).toThrow(IllegalTransitionError);
    }
  });

  it('an operator acts only on UNKNOWN and NEEDS_REVIEW records, never on a live execution or a settled outcome', () => {
    for (const event of OPERATOR_EVENTS) {
      for (const from of ['ABSENT', 'PROCESSING', 'SUCCEEDED', 'FAILED'] as const) {
        expect(allows(from, event)).toBe(false);
      }
      expect(allows('UNKNOWN', event)).toBe(true);
      expect(allows('NEEDS_REVIEW', event)).toBe(true);
    }
  });
});

const T0 = Date.UTC(2030, 0, 1);
const FP = 'f'.repeat(64);
const RETAIN = T0 + 3_600_000;
const EXPIRES_EXECUTE = Math.floor(RETAIN / 1000);
const EXPIRES_REVIEW = Math.floor(RETAIN / 1000) + 7200;

function record(status: RecordStatus, overrides: Partial<IdempotencyRecord> = {}): IdempotencyRecord {
  return {
    tenant: 'tenant-a',
    tool: 'create_order',
    idempotencyKey: 'key-00000001',
    fingerprint: FP,
    status,
    ownerToken: 'owner-1',
    createdAt: T0,
    updatedAt: T0,
    leaseExpiresAt: T0 + 11_000,
    retainUntil: RETAIN,
    expiresAt: EXPIRES_EXECUTE,
    ...overrides,
  };
}

const policies: ExpiryPolicy[] = [
  { onExpired: 'execute', reexecuteSafe: false },
  { onExpired: 'execute', reexecuteSafe: true },
  { onExpired: 'review', reexecuteSafe: false },
  { onExpired: 'review', reexecuteSafe: true },
];
const name = (p: ExpiryPolicy) => `${p.onExpired}/${p.reexecuteSafe ? 'reexecute-safe' : 'not-safe'}`;
const decide = (r: IdempotencyRecord, now: number, policy: ExpiryPolicy, fingerprint = FP) =>
  decideForExisting(r, { fingerprint, now, policy });

describe('decideForExisting', () => {
  describe.each(policies.map((p) => [name(p), p] as const))('policy %s', (_, policy) => {
    it.each(['SUCCEEDED', 'FAILED'] as const)('%s within retention: replay (or conflict on other arguments)', (status) => {
      for (const expiresAt of [EXPIRES_EXECUTE, EXPIRES_REVIEW]) {
        const r = record(status, { expiresAt });
        expect(decide(r, T0, policy)).toEqual({ action: 'replay' });
        expect(decide(r, RETAIN - 1, policy)).toEqual({ action: 'replay' });
        expect(decide(r, RETAIN - 1, policy, 'other')).toEqual({ action: 'conflict' });
      }
    });

    it.each(['SUCCEEDED', 'FAILED'] as const)('%s past its expiry: the key is free, whatever the arguments', (status) => {
      for (const expiresAt of [EXPIRES_EXECUTE, EXPIRES_REVIEW]) {
        const r = record(status, { expiresAt });
        expect(decide(r, expiresAt * 1000, policy)).toEqual({ action: 'claim_again' });
        expect(decide(r, expiresAt * 1000, policy, 'other')).toEqual({ action: 'claim_again' });
      }
    });

    it.each(['SUCCEEDED', 'FAILED'] as const)('%s past retention, before a review expiry: the policy decides', (status) => {
      const r = record(status, { expiresAt: EXPIRES_REVIEW });
      const expected = policy.onExpired === 'execute' ? 'claim_again' : 'review_required';
      expect(decide(r, RETAIN, policy)).toEqual({ action: expected });
      expect(decide(r, EXPIRES_REVIEW * 1000 - 1, policy)).toEqual({ action: expected });
      // Other arguments: a freed key is a new operation; a kept one is still a conflict.
      expect(decide(r, RETAIN, policy, 'other')).toEqual({ action: expected === 'claim_again' ? 'claim_again' : 'conflict' });
    });

    it('PROCESSING with a live lease: wait for the remaining lease', () => {
      expect(decide(record('PROCESSING'), T0 + 1000, policy)).toEqual({ action: 'wait', leaseRemainingMs: 10_000 });
      expect(decide(record('PROCESSING'), T0 + 10_999, policy)).toEqual({ action: 'wait', leaseRemainingMs: 1 });
    });

    it('PROCESSING with a stale lease: take over only where re-execution is safe, else UNKNOWN', () => {
      const expected = policy.reexecuteSafe ? 'take_over' : 'mark_unknown';
      expect(decide(record('PROCESSING'), T0 + 11_000, policy)).toEqual({ action: expected });
      // Never freed by time, even long past retention and expiry.
      expect(decide(record('PROCESSING'), EXPIRES_REVIEW * 1000 + 1, policy)).toEqual({ action: expected });
    });

    it('UNKNOWN: being verified, at any time', () => {
      for (const now of [T0, RETAIN, EXPIRES_REVIEW * 1000 + 1])
        expect(decide(record('UNKNOWN'), now, policy)).toEqual({ action: 'unknown' });
    });

    it('NEEDS_REVIEW: review required, at any time', () => {
      for (const now of [T0, RETAIN, EXPIRES_REVIEW * 1000 + 1])
        expect(decide(record('NEEDS_REVIEW'), now, policy)).toEqual({ action: 'review_required' });
    });

    it.each(['PROCESSING', 'UNKNOWN', 'NEEDS_REVIEW'] as const)(
      '%s with other arguments: conflict, whatever the lease or time',
      (status) => {
        for (const now of [T0, T0 + 11_000, EXPIRES_REVIEW * 1000 + 1])
          expect(decide(record(status), now, policy, 'other')).toEqual({ action: 'conflict' });
      },
    );
  });
});

describe('keyIsFree (the claim condition the store must mirror)', () => {
  it('frees settled records at expiry, or at retention for tools that execute again', () => {
    const r = record('SUCCEEDED', { expiresAt: EXPIRES_REVIEW });
    expect(keyIsFree(r, RETAIN - 1, 'execute')).toBe(false);
    expect(keyIsFree(r, RETAIN, 'execute')).toBe(true);
    expect(keyIsFree(r, RETAIN, 'review')).toBe(false);
    expect(keyIsFree(r, EXPIRES_REVIEW * 1000 - 1, 'review')).toBe(false);
    expect(keyIsFree(r, EXPIRES_REVIEW * 1000, 'review')).toBe(true);
  });

  it('under execute, retention alone decides (the TTL expiry may be rounded down to the second)', () => {
    const r = record('SUCCEEDED', { retainUntil: RETAIN + 500, expiresAt: Math.floor((RETAIN + 500) / 1000) });
    expect(keyIsFree(r, RETAIN + 499, 'execute')).toBe(false);
    expect(keyIsFree(r, RETAIN + 500, 'execute')).toBe(true);
  });

  it('never frees unsettled records', () => {
    for (const status of ['PROCESSING', 'UNKNOWN', 'NEEDS_REVIEW'] as const) {
      expect(keyIsFree(record(status), EXPIRES_REVIEW * 1000 + 1, 'execute')).toBe(false);
    }
  });
});

describe('storedStatesAllowing (what store conditions are rendered from)', () => {
  it('lists, for every event, exactly the stored states the table allows it from', () => {
    for (const event of EVENTS) {
      const expected = STATES.filter((from) => from !== 'ABSENT' && LEGAL[from]?.[event] !== undefined);
      expect(storedStatesAllowing(event)).toEqual(expected);
    }
  });
});

describe('keyExpiryRule (the one key-expiry rule every store renders)', () => {
  it("names the table's expiring states, the field that decides under each policy, and its bound in the field's unit", () => {
    const now = RETAIN + 1234;
    expect(keyExpiryRule(now, 'execute')).toEqual({ statuses: ['SUCCEEDED', 'FAILED'], field: 'retainUntil', freeAtOrBefore: now });
    expect(keyExpiryRule(now, 'review')).toEqual({
      statuses: ['SUCCEEDED', 'FAILED'],
      field: 'expiresAt',
      freeAtOrBefore: Math.floor(now / 1000),
    });
  });

  it('without a policy reads like review: only the expiry frees a key', () => {
    const r = record('SUCCEEDED', { expiresAt: EXPIRES_REVIEW });
    for (const now of [RETAIN, EXPIRES_REVIEW * 1000 - 1, EXPIRES_REVIEW * 1000]) {
      expect(keyIsFree(r, now, undefined)).toBe(keyIsFree(r, now, 'review'));
    }
  });
});

describe('appendReviewEntry (the review log stays within its item)', () => {
  const entry = (reason: string, at: number): ReviewEntry => ({
    by: 'ops',
    at,
    action: 'operator_recheck',
    reason,
    from: 'NEEDS_REVIEW',
    to: 'UNKNOWN',
  });
  const bytes = (entries: ReviewEntry[]) => entries.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0);

  it('keeps the newest entries within the byte budget, however large the entries written before the bound', () => {
    // Three 125 KB reasons, as accepted before reasons were bounded: the fourth decision must still fit one item.
    const legacy = [1, 2, 3].map((at) => entry('r'.repeat(125_000), at));
    const log = appendReviewEntry(legacy, entry('found at the provider', 4));
    expect(log.at(-1)).toMatchObject({ reason: 'found at the provider', at: 4 });
    expect(bytes(log)).toBeLessThanOrEqual(REVIEW_LOG_MAX_BYTES);
    // Entries of the largest allowed reason all fit: the byte budget never drops what the count would keep.
    const full = Array.from({ length: 30 }, (_, i) => entry('é'.repeat(REVIEW_REASON_MAX_CHARS), i));
    const kept = full.reduce<ReviewEntry[]>((log, e) => appendReviewEntry(log, e), []);
    expect(kept).toHaveLength(REVIEW_LOG_MAX_ENTRIES);
    expect(kept.map((e) => e.at)).toEqual(full.slice(-REVIEW_LOG_MAX_ENTRIES).map((e) => e.at));
  });
});
