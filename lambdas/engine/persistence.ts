import type { IdempotencyRecord, ReviewEntry, StoredError } from '../core/state-machine';
import type { IdempotencyPolicy } from '../core/tool-policy';

/**
 * What names a record: the tenant, the tool and the idempotency key.
 * @public
 */
export interface RecordIdentity {
  /** The caller's tenant, from the verified token. */
  tenant: string;
  /** The tool's name. */
  tool: string;
  /** The key as validated (an `idempotency_key` or an `operation_id`). */
  idempotencyKey: string;
}

/**
 * A tool's own item (a business item, an outbox event), created in the same transaction as its SUCCEEDED record.
 * An item with the same key already there refuses the whole completion (TransactionRejectedError): nothing commits.
 * @public
 */
export interface ExtraWrite {
  /** An item to create: written only if no item has its key. */
  create: {
    /** The item's key: its partition and sort key. */
    key: { pk: string; sk: string };
    /** The item's attributes besides its key. */
    item: Record<string, unknown>;
    /** Another table of the same store; default the records' own. */
    table?: string;
  };
}

/** How `IdempotencyStore.claim` and `commitOnce` treat a settled record past its retention. */
export type ClaimOptions = NonNullable<Parameters<IdempotencyStore['claim']>[2]>;

/**
 * What the reconciler concluded about an UNKNOWN record; each is one transition of the state machine.
 *
 * @public
 */
export type Reconciliation =
  /** The downstream has the effect: SUCCEEDED with its result (replayed to the next duplicate). */
  | { event: 'reconciled_found'; result: unknown }
  /** Confirmed absent: the record is deleted, so a retry with the key executes. */
  | { event: 'reconciled_absent' }
  /** Confirmed absent, and the tool's policy is to fail rather than release. */
  | { event: 'reconciled_absent_fail'; error: StoredError }
  /** The downstream could not be asked often enough: parked for a person. */
  | { event: 'reconcile_exhausted'; error: StoredError };

/**
 * What a person decided about an UNKNOWN or NEEDS_REVIEW record; each is one transition of the state machine.
 *
 * @public
 */
export type OperatorDecision =
  /** Verified by hand that the effect exists: SUCCEEDED with its result (replayed to the next call with the key). */
  | { event: 'operator_settled_found'; result: unknown }
  /** Verified absent, tool policy 'release': the record is deleted, so a retry with the key executes once. */
  | { event: 'operator_settled_absent' }
  /** Verified absent, tool policy 'fail'. */
  | { event: 'operator_settled_absent_fail'; error: StoredError }
  /** Back to UNKNOWN with its attempts reset: the reconciler asks the downstream again. */
  | { event: 'operator_recheck' };

/**
 * A record's review log as read: the entries and the version a decision is fenced on.
 *
 * @public
 */
export interface ReviewLog {
  /** The newest decisions (at most 20), oldest first; empty when none. */
  entries: ReviewEntry[];
  /** 0 when nothing was logged yet. */
  version: number;
}

/**
 * The review workflow's side of the store (the `ops` command line tool); the engine never calls it.
 *
 * @public
 */
export interface ReviewStore {
  /** The review log kept beside the record (also after a decision released the key). */
  reviewLog(identity: RecordIdentity): Promise<ReviewLog>;
  /**
   * Applies a person's decision and appends `entry` to the review log, as one conditional write fenced on what was
   * read: the record's status, owner token, attempts and last update, and the log's version. False (and nothing
   * written) when the record or the log changed meanwhile: the reconciler or another person moved first.
   */
  decide(record: IdempotencyRecord, log: ReviewLog, decision: OperatorDecision, entry: ReviewEntry, now: number): Promise<boolean>;
}

/** The statuses of records that need a look (`RecordQueries`). */
export type AttentionStatus = Parameters<RecordQueries['findAttention']>[0];

/**
 * When a record needing a look is due (epoch ms), the order and the bound of the queries: a PROCESSING record at its
 * lease's end, an UNKNOWN record at its next check (its last update when none is set), a NEEDS_REVIEW record at its
 * last update.
 */
export function attentionDueAt(record: IdempotencyRecord): number {
  if (record.status === 'PROCESSING') return record.leaseExpiresAt;
  if (record.status === 'UNKNOWN') return record.nextCheckAt ?? record.updatedAt;
  return record.updatedAt;
}

/**
 * The queries of the reconciler and the review desk (`idempotent-mcp ops`): the records that need a look, found
 * without reading the whole store; the engine never calls them. Reads may lag the writes: a record returned may
 * have moved on since, so every write that acts on one is fenced on it as read. Only records still in the status
 * asked for (as read) and of this store (its key prefix) come back.
 * @public
 */
export interface RecordQueries {
  /**
   * Throws, naming `reader` ("The reconciler"), when this store cannot answer the queries (a DynamoDB store created
   * with `attentionIndex: false`): a reader would find nothing and say nothing. A reader calls it when it is made.
   */
  assertQueryable(reader: string): void;
  /**
   * Records in `status`, the earliest due first, at most `limit`. The statuses of records that need a look: a lease
   * running (or passed), an outcome to verify, a person's review. `dueBy`: only records due at or before this (epoch
   * ms; a PROCESSING record is due at its lease's end, an UNKNOWN one at its next check or else its last update, a
   * NEEDS_REVIEW one at its last update); all when unset.
   */
  findAttention(status: 'PROCESSING' | 'UNKNOWN' | 'NEEDS_REVIEW', query: { dueBy?: number; limit: number }): Promise<IdempotencyRecord[]>;
  /**
   * Every record in `status`, a page (at most `pageSize`) at a time, in no set order across pages: a listing that
   * filters as it goes reads no more than it needs.
   */
  attentionPages(
    status: Parameters<RecordQueries['findAttention']>[0],
    query: { dueBy?: number; pageSize: number },
  ): AsyncIterable<IdempotencyRecord[]>;
  /** How many records are in `status` (the alarms' gauges). May count a record that moved on a moment ago. */
  countAttention(status: Parameters<RecordQueries['findAttention']>[0]): Promise<number>;
}

/** A record's settled outcome, as the store writes it (`IdempotencyStore.settle`). */
export type Settlement = Parameters<IdempotencyStore['settle']>[2];

/**
 * The persistence port of the engine: each method is one conditional write (or read), so the state machine's
 * guarantees hold however many executors race. Errors: `OwnershipLostError` when a fenced write finds the record
 * is no longer ours; `TransactionRejectedError` when the tool's own writes were refused (nothing committed);
 * `StoreUnavailableError` when the write may or may not have been applied.
 * @public
 */
export interface IdempotencyStore {
  /**
   * Creates the PROCESSING record unless the key is held; otherwise returns the existing record.
   * A record carrying our own owner token counts as claimed (a retried request whose first answer was lost).
   * `options.onExpired`, the tool's policy after retention: with 'execute', a settled record past its retention frees
   * its key too.
   */
  claim(
    record: IdempotencyRecord,
    now: number,
    options?: { onExpired?: IdempotencyPolicy['onExpired'] },
  ): Promise<
    /**
     * `answerLost`: the claim was sent more than once (an attempt's answer was lost), so an earlier attempt may still
     * be applied later; the engine then never releases the key with a "nothing ran" answer.
     */
    { claimed: true; answerLost?: boolean } | { claimed: false; existing: IdempotencyRecord }
  >;
  /**
   * The one-request path of a tool whose effect is local: writes the settled (SUCCEEDED or FAILED) record and the
   * tool's writes in one transaction, on the same condition as `claim` (the key is free). A record carrying our own
   * owner token counts as committed (a retried request whose first answer was lost). Throws
   * `TransactionRejectedError` when one of the tool's own writes was refused (nothing committed).
   */
  commitOnce(
    record: IdempotencyRecord,
    now: number,
    options?: { onExpired?: IdempotencyPolicy['onExpired'] },
    writes?: ExtraWrite[],
  ): Promise<
    | { committed: true }
    /** The key is held: the caller is a duplicate and answers from this record. Nothing was written. */
    | { committed: false; existing: IdempotencyRecord }
    /** Another transaction on the same items was in flight: nothing was written; trying again may commit or meet its record. */
    | { committed: false; contended: true }
  >;
  /** Strongly consistent read. */
  get(identity: RecordIdentity): Promise<IdempotencyRecord | undefined>;
  /**
   * PROCESSING (owned by `ownerToken`) to SUCCEEDED/FAILED, with the tool's writes in the same transaction. The
   * settlement is the record's settled outcome: SUCCEEDED with a result, or FAILED with an error.
   */
  settle(
    identity: RecordIdentity,
    ownerToken: string,
    settlement: {
      status: 'SUCCEEDED' | 'FAILED';
      result?: unknown;
      error?: StoredError;
      errorType?: IdempotencyRecord['errorType'];
    },
    now: number,
    writes?: ExtraWrite[],
  ): Promise<void>;
  /** Deletes the PROCESSING record we own: nothing happened and a retry with the key must execute. */
  release(identity: RecordIdentity, ownerToken: string): Promise<boolean>;
  /**
   * PROCESSING (owned by `ownerToken`) to UNKNOWN, queued for the reconciler at `nextCheckAt`, with `inFlightUntil`
   * (until then a request of the execution may still land: lambdas/core/in-flight.ts).
   */
  markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ): Promise<boolean>;
  /**
   * Engine and reconciler: a PROCESSING record whose lease passed (its executor vanished) to UNKNOWN, due for a check
   * now, with `inFlightUntil` (its lease's end plus the tool's window). Fenced on the owner token and the lease it
   * read, so a live executor or a takeover keeps the record.
   */
  expireLease(record: IdempotencyRecord, now: number, inFlightUntil: number): Promise<boolean>;
  /**
   * Reconciler: applies a finding to an UNKNOWN record. Fenced on the version it read (owner token and attempts),
   * so two reconcilers never both act on one check. False when the record moved on.
   */
  reconcile(record: IdempotencyRecord, outcome: Reconciliation, now: number): Promise<boolean>;
  /**
   * Reconciler: the downstream could not answer; the record stays UNKNOWN with one more attempt, next look at
   * `nextCheckAt`. Same fence. `countsAsAttempt: false` (a check inside the in-flight window, which could not decide
   * anyway): the attempts stay as they are.
   */
  deferReconcile(
    record: IdempotencyRecord,
    nextCheckAt: number,
    reason: StoredError,
    now: number,
    options?: { countsAsAttempt?: boolean },
  ): Promise<boolean>;
  /** A stale PROCESSING record gets a new owner and lease; false when someone else moved first. */
  takeOver(
    identity: RecordIdentity,
    expectedOwnerToken: string,
    newOwnerToken: string,
    leaseExpiresAt: number,
    now: number,
  ): Promise<boolean>;
}

/**
 * A small JSON value kept beside a record, named, with the record's retention: what a tool needs later to reconcile
 * a call that the record cannot tell (it keeps a fingerprint of the arguments, not the arguments).
 * @public
 */
export interface RecordMemos {
  /** Keeps `value` under `name` beside the record, until `expiresAtSeconds` (the record's retention). */
  put(identity: RecordIdentity, name: string, value: unknown, expiresAtSeconds: number): Promise<void>;
  /** undefined: no memo of that name was written. */
  get(identity: RecordIdentity, name: string): Promise<unknown>;
}
