import type { IdempotencyPolicy } from '../core/tool-policy';
import { OwnershipLostError, TransactionRejectedError } from '../core/errors';
import { leaseHasPassed } from '../core/lease';
import {
  allows,
  appendReviewEntry,
  keyIsFree,
  OPERATOR_RECHECK_ERROR,
  retentionFromNow,
  transition,
  type IdempotencyRecord,
  type RecordState,
  type ReviewEntry,
  type StoredError,
  type TransitionEvent,
} from '../core/state-machine';
import {
  attentionDueAt,
  type AttentionStatus,
  type ExtraWrite,
  type IdempotencyStore,
  type OperatorDecision,
  type Reconciliation,
  type RecordIdentity,
  type ReviewLog,
  type ReviewStore,
  type RecordQueries,
} from './persistence';

const itemKey = (key: ExtraWrite['create']['key'], table = '') => JSON.stringify([table, key.pk, key.sk]);
const copy = <T>(value: T): T => structuredClone(value);

/**
 * The store port in one process's memory: the engine's unit tests, and single-process use where losing the records
 * with the process is acceptable. Each method checks the same condition as the DynamoDB adapter's conditional write
 * and applies it whole or not at all (the store conformance suite holds both to that). Every write's status check
 * is the engine's transition table's, and which keys are free its expiry rule's, as in every store.
 * @public
 */
export class InMemoryIdempotencyStore implements IdempotencyStore, ReviewStore, RecordQueries {
  private readonly records: Map<string, IdempotencyRecord>;
  private readonly reviewLogs: Map<string, ReviewLog>;
  private readonly items: Map<string, Record<string, unknown>>;
  /** Whose records these are on a shared table: as the DynamoDB adapter's `keyPrefix`. */
  readonly keyPrefix: string;

  /** `options`: whose records it keeps, and which store's records it shares. */
  constructor(
    options: {
      /** Whose records these are, as the DynamoDB store's `keyPrefix`: its queries find only its own. Default none. */
      keyPrefix?: string;
      /** Another in-memory store whose records this one shares, as two stores share one table (tests of a shared table). */
      sharedWith?: InMemoryIdempotencyStore;
    } = {},
  ) {
    const keyPrefix = options.keyPrefix ?? '';
    if (typeof keyPrefix !== 'string' || !/^[A-Za-z0-9_.:-]*$/.test(keyPrefix))
      throw new TypeError('InMemoryIdempotencyStore: keyPrefix may contain only A-Z a-z 0-9 _ . : -');
    this.keyPrefix = keyPrefix;
    const table = options.sharedWith;
    this.records = table ? table.records : new Map();
    this.reviewLogs = table ? table.reviewLogs : new Map();
    this.items = table ? table.items : new Map();
  }

  /** The record's place: its store's prefix, tenant, tool and key. */
  private key(id: RecordIdentity): string {
    return JSON.stringify([this.keyPrefix, id.tenant, id.tool, id.idempotencyKey]);
  }

  /** {@inheritDoc IdempotencyStore.claim} */
  async claim(
    record: IdempotencyRecord,
    now: number,
    options: { onExpired?: IdempotencyPolicy['onExpired'] } = {},
  ): ReturnType<IdempotencyStore['claim']> {
    transition('ABSENT', 'claim');
    const existing = this.records.get(this.key(record));
    if (!existing || keyIsFree(existing, now, options.onExpired)) {
      this.records.set(this.key(record), copy(record));
      return { claimed: true };
    }
    if (existing.status === 'PROCESSING' && existing.ownerToken === record.ownerToken) return { claimed: true };
    return { claimed: false, existing: copy(existing) };
  }

  /** {@inheritDoc IdempotencyStore.commitOnce} */
  async commitOnce(
    record: IdempotencyRecord,
    now: number,
    options: { onExpired?: IdempotencyPolicy['onExpired'] } = {},
    writes: ExtraWrite[] = [],
  ): ReturnType<IdempotencyStore['commitOnce']> {
    transition(transition('ABSENT', 'claim'), record.status === 'SUCCEEDED' ? 'complete' : 'fail');
    const existing = this.records.get(this.key(record));
    if (existing && !keyIsFree(existing, now, options.onExpired)) {
      if (existing.ownerToken === record.ownerToken) return { committed: true };
      return { committed: false, existing: copy(existing) };
    }
    this.refuseTakenItems(writes);
    for (const { create } of writes) this.items.set(itemKey(create.key, create.table), copy({ ...create.item, ...create.key }));
    this.records.set(this.key(record), copy(record));
    return { committed: true };
  }

  /** A tool's item whose key is already there (or twice in one transaction) refuses the whole transaction. */
  private refuseTakenItems(writes: ExtraWrite[]) {
    const taken = writes.map(({ create }) => (this.items.has(itemKey(create.key, create.table)) ? 'ConditionalCheckFailed' : 'None'));
    const keys = writes.map(({ create }) => itemKey(create.key, create.table));
    const duplicate = keys.some((key, i) => keys.indexOf(key) !== i);
    if (taken.includes('ConditionalCheckFailed') || duplicate) throw new TransactionRejectedError(['None', ...taken]);
  }

  /** {@inheritDoc IdempotencyStore.get} */
  async get(identity: RecordIdentity): Promise<IdempotencyRecord | undefined> {
    const record = this.records.get(this.key(identity));
    return record && copy(record);
  }

  /** {@inheritDoc IdempotencyStore.settle} */
  async settle(
    identity: RecordIdentity,
    ownerToken: string,
    settlement: Parameters<IdempotencyStore['settle']>[2],
    now: number,
    writes: ExtraWrite[] = [],
  ): Promise<void> {
    const event = settlement.status === 'SUCCEEDED' ? 'complete' : 'fail';
    transition('PROCESSING', event);
    const record = this.owned(identity, ownerToken, event);
    if (!record) throw new OwnershipLostError();
    this.refuseTakenItems(writes);
    for (const { create } of writes) this.items.set(itemKey(create.key, create.table), copy({ ...create.item, ...create.key }));
    record.status = settlement.status;
    record.updatedAt = now;
    if (settlement.result !== undefined) record.result = copy(settlement.result);
    if (settlement.error !== undefined) record.error = copy(settlement.error);
    if (settlement.errorType !== undefined) record.errorType = settlement.errorType;
  }

  /** {@inheritDoc IdempotencyStore.release} */
  async release(identity: RecordIdentity, ownerToken: string): Promise<boolean> {
    transition('PROCESSING', 'release');
    if (!this.owned(identity, ownerToken, 'release')) return false;
    this.records.delete(this.key(identity));
    return true;
  }

  /** {@inheritDoc IdempotencyStore.markUnknown} */
  async markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'uncertain');
    const record = this.owned(identity, ownerToken, 'uncertain');
    if (!record) return false;
    this.toUnknown(record, now, details.error, details.errorType, details.nextCheckAt, details.inFlightUntil);
    return true;
  }

  /** {@inheritDoc IdempotencyStore.expireLease} */
  async expireLease(read: IdempotencyRecord, now: number, inFlightUntil: number): Promise<boolean> {
    transition('PROCESSING', 'lease_expired');
    const record = this.owned(read, read.ownerToken, 'lease_expired');
    if (!record || record.leaseExpiresAt !== read.leaseExpiresAt || !leaseHasPassed(record.leaseExpiresAt, now)) return false;
    this.toUnknown(
      record,
      now,
      { code: 'OUTCOME_UNKNOWN', message: 'the executor stopped before recording an outcome' },
      'lease_expired',
      now,
      inFlightUntil,
    );
    return true;
  }

  /** {@inheritDoc IdempotencyStore.reconcile} */
  async reconcile(read: IdempotencyRecord, outcome: Reconciliation, now: number): Promise<boolean> {
    const to = transition('UNKNOWN', outcome.event);
    const record = this.asRead(read, outcome.event);
    if (!record) return false;
    this.resolve(record, read, outcome, to, now);
    return true;
  }

  /** {@inheritDoc IdempotencyStore.deferReconcile} */
  async deferReconcile(
    read: IdempotencyRecord,
    nextCheckAt: number,
    reason: StoredError,
    _now: number,
    options: { countsAsAttempt?: boolean } = {},
  ): Promise<boolean> {
    transition('UNKNOWN', 'reconcile_deferred');
    const record = this.asRead(read, 'reconcile_deferred');
    if (!record) return false;
    if (options.countsAsAttempt !== false) record.reconcileAttempts = (read.reconcileAttempts ?? 0) + 1;
    record.nextCheckAt = nextCheckAt;
    record.error = copy(reason);
    return true;
  }

  /** {@inheritDoc IdempotencyStore.takeOver} */
  async takeOver(
    identity: RecordIdentity,
    expectedOwnerToken: string,
    newOwnerToken: string,
    leaseExpiresAt: number,
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'take_over');
    const record = this.owned(identity, expectedOwnerToken, 'take_over');
    // The old lease must still be stale: a racing executor that renewed it keeps it.
    if (!record || !leaseHasPassed(record.leaseExpiresAt, now)) return false;
    record.ownerToken = newOwnerToken;
    record.leaseExpiresAt = leaseExpiresAt;
    record.updatedAt = now;
    return true;
  }

  /** {@inheritDoc ReviewStore.reviewLog} */
  async reviewLog(identity: RecordIdentity): Promise<ReviewLog> {
    return copy(this.reviewLogs.get(this.key(identity)) ?? { entries: [], version: 0 });
  }

  /** A person's decision, fenced as the DynamoDB adapter's: the record's status, owner, last update and attempts as read, and the log's version. */
  async decide(read: IdempotencyRecord, log: ReviewLog, decision: OperatorDecision, entry: ReviewEntry, now: number): Promise<boolean> {
    const to = transition(read.status, decision.event);
    const key = this.key(read);
    const record = this.asRead(read, decision.event, { exact: true });
    if (!record || (this.reviewLogs.get(key)?.version ?? 0) !== log.version) return false;
    this.reviewLogs.set(key, { entries: appendReviewEntry(log.entries, copy(entry)), version: log.version + 1 });
    this.resolve(record, read, decision, to, now);
    return true;
  }

  /** {@inheritDoc RecordQueries.assertQueryable} */
  assertQueryable(): void {}

  /** {@inheritDoc RecordQueries.findAttention} */
  async findAttention(
    status: Parameters<RecordQueries['findAttention']>[0],
    query: { dueBy?: number; limit: number },
  ): Promise<IdempotencyRecord[]> {
    return this.needingAttention(status, query.dueBy).slice(0, query.limit);
  }

  /** {@inheritDoc RecordQueries.attentionPages} */
  async *attentionPages(
    status: Parameters<RecordQueries['attentionPages']>[0],
    query: { dueBy?: number; pageSize: number },
  ): AsyncIterable<IdempotencyRecord[]> {
    const found = this.needingAttention(status, query.dueBy);
    for (let i = 0; i < found.length; i += query.pageSize) yield found.slice(i, i + query.pageSize);
  }

  /** {@inheritDoc RecordQueries.countAttention} */
  async countAttention(status: Parameters<RecordQueries['countAttention']>[0]): Promise<number> {
    return this.needingAttention(status).length;
  }

  /** Copies of the records in `status` due by `dueBy`, the earliest due first. */
  private needingAttention(status: AttentionStatus, dueBy = Number.POSITIVE_INFINITY): IdempotencyRecord[] {
    // This store's own records only, as the DynamoDB adapter's queries read its own index partitions.
    const own = `${JSON.stringify([this.keyPrefix]).slice(0, -1)},`;
    return [...this.records]
      .filter(([key]) => key.startsWith(own))
      .map(([, record]) => record)
      .filter((record) => record.status === status && attentionDueAt(record) <= dueBy)
      .sort((a, b) => attentionDueAt(a) - attentionDueAt(b))
      .map(copy);
  }

  /** A tool's item created by a settlement (tests look at what committed). */
  item(key: ExtraWrite['create']['key'], table?: string): Record<string, unknown> | undefined {
    const item = this.items.get(itemKey(key, table));
    return item && copy(item);
  }

  /** The record, when `event` is legal from its status (the table) and it is held by `ownerToken`. */
  private owned(identity: RecordIdentity, ownerToken: string, event: TransitionEvent): IdempotencyRecord | undefined {
    const record = this.records.get(this.key(identity));
    return record && allows(record.status, event) && record.ownerToken === ownerToken ? record : undefined;
  }

  /**
   * The record at the version read, as the DynamoDB adapter fences it: `event` legal from its status, same owner,
   * same number of attempts (the reconciler's fence); `exact` (a person's decision) adds the status and the last
   * update, since attempts alone could come round again.
   */
  private asRead(read: IdempotencyRecord, event: TransitionEvent, { exact = false } = {}): IdempotencyRecord | undefined {
    const record = this.owned(read, read.ownerToken, event);
    if (!record || record.reconcileAttempts !== read.reconcileAttempts) return undefined;
    return !exact || (record.status === read.status && record.updatedAt === read.updatedAt) ? record : undefined;
  }

  /**
   * An outcome settled for an UNKNOWN or NEEDS_REVIEW record, by the reconciler or a person: the one write of both,
   * by the state the table sends it to (`to`). ABSENT: deleted. SUCCEEDED or FAILED: replayed for a full retention
   * from now. NEEDS_REVIEW: parked, one more attempt counted. UNKNOWN: checked again from now, attempts reset.
   */
  private resolve(
    record: IdempotencyRecord,
    read: IdempotencyRecord,
    outcome: Reconciliation | OperatorDecision,
    to: RecordState,
    now: number,
  ) {
    if (to === 'ABSENT') {
      this.records.delete(this.key(read));
      return;
    }
    record.status = to;
    record.updatedAt = now;
    if (to === 'SUCCEEDED' || to === 'FAILED') {
      Object.assign(record, retentionFromNow(read, now));
      delete record.nextCheckAt;
      if (to === 'SUCCEEDED') {
        record.result = copy(('result' in outcome ? outcome.result : undefined) ?? null);
        delete record.error;
        delete record.errorType;
      } else {
        record.error = copy('error' in outcome ? outcome.error : undefined);
        record.errorType = 'terminal';
      }
    } else if (to === 'NEEDS_REVIEW') {
      delete record.nextCheckAt;
      record.error = copy('error' in outcome ? outcome.error : undefined);
      record.errorType = 'reconcile_exhausted';
      record.reconcileAttempts = (read.reconcileAttempts ?? 0) + 1;
    } else {
      record.nextCheckAt = now;
      record.error = copy(OPERATOR_RECHECK_ERROR);
      delete record.reconcileAttempts;
    }
  }

  private toUnknown(
    record: IdempotencyRecord,
    now: number,
    error: StoredError,
    errorType: IdempotencyRecord['errorType'],
    nextCheckAt: number,
    inFlightUntil: number,
  ) {
    record.status = 'UNKNOWN';
    record.updatedAt = now;
    record.error = copy(error);
    record.errorType = errorType;
    record.nextCheckAt = nextCheckAt;
    record.inFlightUntil = inFlightUntil;
    // Never freed by time: deleting it would free a key whose effect may exist.
    record.expiresAt = Number.POSITIVE_INFINITY;
  }
}
