import type { ToolFailure } from './errors';
import { leaseHasPassed, leaseRemainingMs } from './lease';
import type { IdempotencyPolicy } from './tool-policy';

/** A record's stored status (the lifecycle is on `IdempotencyRecord.status`). */
export type RecordStatus = IdempotencyRecord['status'];
/** A record's status, or ABSENT when there is none. */
export type RecordState = RecordStatus | 'ABSENT';

export type TransitionEvent =
  | 'claim'
  | 'complete'
  | 'fail'
  | 'release'
  | 'uncertain'
  | 'lease_expired'
  | 'take_over'
  | 'reconciled_found'
  | 'reconciled_absent'
  | 'reconciled_absent_fail'
  | 'reconcile_exhausted'
  | 'reconcile_deferred'
  | 'expire'
  | OperatorEvent;

/** What a person decides about an operation whose outcome the reconciler could not settle (the review workflow). */
export type OperatorEvent = ReviewEntry['action'];

/** A person settles what they verified by hand, or sends the record back to the reconciler with fresh attempts. */
const OPERATOR_TRANSITIONS: Record<OperatorEvent, RecordState> = {
  operator_settled_found: 'SUCCEEDED',
  operator_settled_absent: 'ABSENT',
  operator_settled_absent_fail: 'FAILED',
  operator_recheck: 'UNKNOWN',
};

const TRANSITIONS: Record<RecordState, Partial<Record<TransitionEvent, RecordState>>> = {
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
    ...OPERATOR_TRANSITIONS,
  },
  SUCCEEDED: { expire: 'ABSENT' },
  FAILED: { expire: 'ABSENT' },
  // Only a person moves a record out of review (`npm run ops -- settle | recheck`).
  NEEDS_REVIEW: { ...OPERATOR_TRANSITIONS },
};

/** The table itself, read-only: `test/models/emit-transitions.ts` renders it for the spin model (one table, not two). */
export const TRANSITION_TABLE: Readonly<Record<RecordState, Readonly<Partial<Record<TransitionEvent, RecordState>>>>> = TRANSITIONS;

export class IllegalTransitionError extends Error {
  constructor(
    readonly from: RecordState,
    readonly event: TransitionEvent,
  ) {
    super(`no transition from ${from} on ${event}`);
    this.name = 'IllegalTransitionError';
  }
}

/** The one definition of which moves are legal; every store write is one of these. */
export function transition(from: RecordState, event: TransitionEvent): RecordState {
  const to = TRANSITIONS[from][event];
  if (!to) throw new IllegalTransitionError(from, event);
  return to;
}

/** Whether `event` is legal from `from`, without throwing: the review tool refuses a wrong state before writing. */
export function allows(from: RecordState, event: TransitionEvent): boolean {
  return TRANSITIONS[from][event] !== undefined;
}

const STATES = Object.keys(TRANSITIONS) as RecordState[];

/**
 * The stored statuses a write making `event` may start from, read off the table. Store adapters derive each write's
 * status condition from it (ABSENT, having no stored status, is the adapter's "no item" condition).
 */
export function storedStatesAllowing(event: TransitionEvent): RecordStatus[] {
  return STATES.filter((state): state is RecordStatus => state !== 'ABSENT' && TRANSITIONS[state][event] !== undefined);
}

export const isSettled = (status: RecordState): status is 'SUCCEEDED' | 'FAILED' => status === 'SUCCEEDED' || status === 'FAILED';

/**
 * A failure as a record keeps it: a code and a sentence.
 * @public
 */
export interface StoredError {
  /** A stable code: an `ErrorCode`, or the tool's own (a `ToolFailure`'s `code`). */
  code: string;
  /** One sentence, as the caller reads it. */
  message: string;
}

/**
 * What the store keeps for one identity. Times are epoch ms except `expiresAt` (epoch seconds, the TTL attribute).
 *
 * @public
 */
export interface IdempotencyRecord {
  /** The caller's tenant, from the verified token. */
  tenant: string;
  /** The tool's name. */
  tool: string;
  /** The key as validated (an `idempotency_key` or an `operation_id`). */
  idempotencyKey: string;
  /** SHA-256 (hex) of the canonical business arguments: a call with the key and another fingerprint is a conflict. */
  fingerprint: string;
  /**
   * The lifecycle of one idempotency record (tenant + tool + key).
   *
   *   ABSENT --claim--> PROCESSING --complete--> SUCCEEDED --expire--> ABSENT
   *                         |  \--fail-------> FAILED ----expire--> ABSENT
   *                         |  \--release----> ABSENT            (transient, known not to have happened)
   *                         |  \--uncertain--> UNKNOWN           (may have happened)
   *                         |  \--lease_expired--> UNKNOWN       (executor vanished; not safe to re-run)
   *                         \--take_over--> PROCESSING           (executor vanished; downstream dedups on our key)
   *   UNKNOWN --reconciled_found--> SUCCEEDED | --reconciled_absent--> ABSENT
   *           --reconciled_absent_fail--> FAILED | --reconcile_exhausted--> NEEDS_REVIEW
   *           --reconcile_deferred--> UNKNOWN    (the downstream could not be asked: one more attempt counted; or
   *                                              asked inside the in-flight window, lambdas/core/in-flight.ts: not counted)
   *   UNKNOWN | NEEDS_REVIEW --operator_settled_found--> SUCCEEDED | --operator_settled_absent--> ABSENT
   *           --operator_settled_absent_fail--> FAILED | --operator_recheck--> UNKNOWN (attempts reset)
   */
  status: 'PROCESSING' | 'SUCCEEDED' | 'FAILED' | 'UNKNOWN' | 'NEEDS_REVIEW';
  /** The executor that holds the record (a random id per claim or takeover): every write of the outcome is fenced on it. */
  ownerToken: string;
  /** When the key was claimed (epoch ms): a replay's `first_executed_at`. */
  createdAt: number;
  /** The last write (epoch ms). */
  updatedAt: number;
  /** Until then the executor may still be working; afterwards the record is stale. */
  leaseExpiresAt: number;
  /** Until then duplicates replay; afterwards the tool's expiry policy applies. */
  retainUntil: number;
  /** TTL: after it the key may be claimed again (DynamoDB deletes it some time later, DynamoDB Local never). */
  expiresAt: number;
  /** The first call's correlation id (`trace_id`), when it sent one. */
  traceId?: string;
  /** The tool's result, on SUCCEEDED: replayed to every duplicate. */
  result?: unknown;
  /** Why, on FAILED, UNKNOWN and NEEDS_REVIEW: replayed on FAILED. */
  error?: StoredError;
  /** What kind of failure `error` is: the tool's (`ToolFailure.kind`), or what the engine or reconciler met. */
  errorType?: ToolFailure['kind'] | 'lease_expired' | 'store_error' | 'result_too_large' | 'reconcile_exhausted';
  /** UNKNOWN records: the reconciler's checks so far (absent: none); a person's recheck resets it. */
  reconcileAttempts?: number;
  /** For UNKNOWN records: when the reconciler should look next. */
  nextCheckAt?: number;
  /**
   * For UNKNOWN records: until then a downstream request of the operation may still apply its effect, so a lookup
   * finding nothing decides nothing (lambdas/core/in-flight.ts). Written with the transition to UNKNOWN.
   */
  inFlightUntil?: number;
  /**
   * What the tool keeps with its claim (`WriteToolSpec.memo`): written with the record before the tool runs, so a
   * record whose outcome is lost always has it; its reconcile reads it here (the gateway's lookup).
   */
  memo?: unknown;
}

/**
 * One decision of the review workflow, kept beside the record (and after it, when the decision released the key).
 *
 * @public
 */
export interface ReviewEntry {
  /** Who: the caller's AWS identity (STS ARN), or the OS user locally. */
  by: string;
  /** Epoch ms. */
  at: number;
  /** What a person decided about an operation whose outcome the reconciler could not settle. */
  action: 'operator_settled_found' | 'operator_settled_absent' | 'operator_settled_absent_fail' | 'operator_recheck';
  /** Why, in the person's words (at most 1000 characters): a sentence, a ticket link. */
  reason: string;
  /** The record's status before the decision. */
  from: IdempotencyRecord['status'];
  /** The status after it; ABSENT: the record was deleted and the key is free. */
  to: IdempotencyRecord['status'] | 'ABSENT';
}

/** The review log is short: an incident's few decisions, not a history. */
export const REVIEW_LOG_MAX_ENTRIES = 20;
/** A decision's reason: a sentence or a short paragraph, with a ticket link, not a document. */
export const REVIEW_REASON_MAX_CHARS = 1000;
/**
 * The log is one DynamoDB item (at most 400 KB): kept well under it, so a log written before reasons were bounded
 * can never block the next decision on its key.
 */
export const REVIEW_LOG_MAX_BYTES = 100_000;

/** A settled record replays for a full retention from `now` (when it settled), and only then may TTL take it. */
export function retentionFromNow(
  record: Pick<IdempotencyRecord, 'retainUntil' | 'createdAt'>,
  now: number,
): { retainUntil: number; expiresAt: number } {
  const retainUntil = Math.max(record.retainUntil, now + (record.retainUntil - record.createdAt));
  return { retainUntil, expiresAt: Math.floor(retainUntil / 1000) };
}

/** The error an UNKNOWN record carries after an operator's `recheck`. */
export const OPERATOR_RECHECK_ERROR: StoredError = {
  code: 'OUTCOME_UNKNOWN',
  message: 'an operator asked for the downstream to be checked again',
};

const entryBytes = (entry: unknown) => Buffer.byteLength(JSON.stringify(entry));

/** The log with `entry` appended: the newest entries that fit both the entry count and the byte budget. */
export function appendReviewEntry(entries: readonly ReviewEntry[], entry: ReviewEntry): ReviewEntry[] {
  const kept: ReviewEntry[] = [];
  let bytes = 0;
  for (const e of [...entries, entry].reverse()) {
    bytes += entryBytes(e);
    if (kept.length === REVIEW_LOG_MAX_ENTRIES || (kept.length > 0 && bytes > REVIEW_LOG_MAX_BYTES)) break;
    kept.unshift(e);
  }
  return kept;
}

/** Whether `entries` fit the bounds of a log kept in one item: the review log's entry count and byte budget. */
export function withinLogBounds(entries: readonly unknown[]): boolean {
  return (
    entries.length <= REVIEW_LOG_MAX_ENTRIES &&
    entries.reduce<number>((bytes, entry) => bytes + entryBytes(entry), 0) <= REVIEW_LOG_MAX_BYTES
  );
}

/** How long an audit log (the review log, an approval's rounds) is kept after its last entry: well beyond its record. */
export const AUDIT_LOG_RETENTION_SECONDS = 400 * 24 * 3600;

/** What happens to a key after its record's retention, and whether a stale execution may run again. */
export interface ExpiryPolicy {
  /** After retention: run the operation again, or refuse with REVIEW_REQUIRED and run nothing (the tool's setting). */
  onExpired: NonNullable<IdempotencyPolicy['onExpired']>;
  /** Whether a stale PROCESSING record may be re-executed (the downstream dedups on our key). */
  reexecuteSafe: boolean;
}

export type ExistingRecordDecision =
  /** Stored SUCCEEDED/FAILED within retention: replay it. */
  | { action: 'replay' }
  /** Same key, other arguments: refuse, run nothing. */
  | { action: 'conflict' }
  /** Another executor holds a live lease: wait a little, then answer "in progress". */
  | { action: 'wait'; leaseRemainingMs: number }
  /** The executor's lease passed and re-running is safe: take over with a new owner token. */
  | { action: 'take_over' }
  /** The executor's lease passed and re-running is not safe: the outcome must be verified. */
  | { action: 'mark_unknown' }
  /** The outcome is being verified by the reconciler. */
  | { action: 'unknown' }
  /** Past retention under the review policy, or parked for a person. */
  | { action: 'review_required' }
  /** The record expired: the key is free again (the claim raced with the clock). */
  | { action: 'claim_again' };

/**
 * The key-expiry rule as data, so that every store renders the same predicate in its claim condition (TTL deletes
 * late, DynamoDB Local never): a record in one of `statuses` frees its key once its `field` is at or before
 * `freeAtOrBefore` (in the field's own unit: epoch ms for `retainUntil`, epoch seconds for `expiresAt`).
 */
export interface KeyExpiryRule {
  /** The statuses the table lets `expire` (the settled ones). Unsettled records never free their key by time. */
  statuses: readonly RecordStatus[];
  field: 'retainUntil' | 'expiresAt';
  freeAtOrBefore: number;
}

const EXPIRING_STATUSES = storedStatesAllowing('expire');

/**
 * Which records no longer hold their key at `now`, under the tool's policy: 'execute' frees a settled record when
 * its retention ends (even one written under 'review', which carries a later expiry); 'review' keeps it until its
 * expiry (the end of the review window). Without a policy (a store called with none) only the expiry frees it: the
 * reading that never runs an operation twice too early.
 */
export function keyExpiryRule(now: number, onExpired: ExpiryPolicy['onExpired'] | undefined): KeyExpiryRule {
  return onExpired === 'execute'
    ? { statuses: EXPIRING_STATUSES, field: 'retainUntil', freeAtOrBefore: now }
    : { statuses: EXPIRING_STATUSES, field: 'expiresAt', freeAtOrBefore: Math.floor(now / 1000) };
}

/**
 * Whether `record` no longer holds its key, so a new claim may overwrite it: `keyExpiryRule` applied to one record.
 * The engine, the in-memory store, `get_operation_status` and the tool's pre-checks ask this; the DynamoDB store
 * renders the same rule as its claim condition.
 */
export function keyIsFree(record: IdempotencyRecord, now: number, onExpired: ExpiryPolicy['onExpired'] | undefined): boolean {
  const rule = keyExpiryRule(now, onExpired);
  return rule.statuses.includes(record.status) && record[rule.field] <= rule.freeAtOrBefore;
}

/** What a caller that did not win the claim does with the record it found. Pure. */
export function decideForExisting(
  record: IdempotencyRecord,
  request: { fingerprint: string; now: number; policy: ExpiryPolicy },
): ExistingRecordDecision {
  const { now, policy } = request;
  // Before the fingerprint: a freed key may be reused with other arguments.
  if (keyIsFree(record, now, policy.onExpired)) return { action: 'claim_again' };
  if (record.fingerprint !== request.fingerprint) return { action: 'conflict' };
  switch (record.status) {
    case 'SUCCEEDED':
    case 'FAILED':
      // Past retention and not free: only the review policy keeps a record this long.
      return now < record.retainUntil ? { action: 'replay' } : { action: 'review_required' };
    case 'PROCESSING':
      if (!leaseHasPassed(record.leaseExpiresAt, now))
        return { action: 'wait', leaseRemainingMs: leaseRemainingMs(record.leaseExpiresAt, now) };
      return policy.reexecuteSafe ? { action: 'take_over' } : { action: 'mark_unknown' };
    case 'UNKNOWN':
      return { action: 'unknown' };
    case 'NEEDS_REVIEW':
      return { action: 'review_required' };
  }
}
