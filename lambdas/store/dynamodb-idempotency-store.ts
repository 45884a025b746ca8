import { OwnershipLostError, TransactionRejectedError } from '../core/errors';
import { transition, type IdempotencyRecord, type ReviewEntry, type StoredError } from '../core/state-machine';
import type { IdempotencyPolicy } from '../core/tool-policy';
import type {
  AttentionStatus,
  ExtraWrite,
  IdempotencyStore,
  OperatorDecision,
  Reconciliation,
  RecordIdentity,
  ReviewLog,
  ReviewStore,
  RecordQueries,
} from '../engine/persistence';
import type { DynamoDBClient, DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, TransactWriteCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createDynamoDbClient } from './clients';
import { claimByCondition, leasePassedClause } from './conditional-claim';
import { AttentionIndexOffError, attentionPages, countAttention, queryAttention } from './attention-index';
import { ownedFence, readFence } from './record-conditions';
import { isRecordItemOf, itemToRecord } from './record-item';
import { RecordRequests } from './record-requests';
import { cancellationReasons, isConditionRefusal, unavailable, type Item } from './refusals';
import type { AttentionKind } from './table-schema';

/** Where the attention index keeps records of each status that needs a look. */
const ATTENTION_KIND: Record<AttentionStatus, AttentionKind> = { PROCESSING: 'LEASE', UNKNOWN: 'UNKNOWN', NEEDS_REVIEW: 'REVIEW' };

/** The error an UNKNOWN record carries when its executor's lease passed without an outcome. */
const LEASE_EXPIRED_ERROR: StoredError = { code: 'OUTCOME_UNKNOWN', message: 'the executor stopped before recording an outcome' };

/**
 * The DynamoDB adapter of the idempotency store: one conditional request per state transition.
 * A replay or a conflict costs exactly the failed claim (the existing item comes back with the failure).
 * @public
 */
export class DynamoDbIdempotencyStore implements IdempotencyStore, ReviewStore, RecordQueries {
  /** The document client the store writes with (the outbox and the tools' writes may share it). */
  readonly doc: DynamoDBDocumentClient;
  /** The table the records live in (the constructor's `tableName`). */
  readonly tableName: string;
  /** Whose records these are on a shared table (the constructor's `keyPrefix`); '' when none. */
  readonly keyPrefix: string;
  /** False: no attention index attributes are written (see the constructor's `attentionIndex`). */
  readonly attentionIndex: boolean;
  /** The requests of each write, for this store's table, prefix and index (record-requests.ts). */
  private readonly requests: RecordRequests;

  /** `options`: the document client, the table, the key prefix, the attention index. */
  constructor(options: {
    /**
     * The document client to use (`createDynamoDbClient()`, shared with the outbox and the tools' own writes). One of
     * `client`, `awsSdkV3Client` or `clientConfig`; with none, a client made by `createDynamoDbClient()`.
     */
    client?: DynamoDBDocumentClient;
    /** Your own AWS SDK DynamoDB client, used as configured (as Powertools' `DynamoDBPersistenceLayer` takes it). */
    awsSdkV3Client?: DynamoDBClient;
    /** Settings over `createDynamoDbClient`'s defaults for a client made here (as Powertools' `clientConfig`). */
    clientConfig?: DynamoDBClientConfig;
    /** The table, of the toolkit's schema (`ensureTable` and `IdempotentMcpEndpoint` create one). */
    tableName: string;
    /**
     * Whose records these are, on a table shared with other endpoints, gateways or data: put before every record's
     * partition key, and naming the record's own partitions of the attention index. A store reads, lists, counts and
     * settles only the records of its own prefix; the same tenant, tool and key under two prefixes are two records.
     * Default none (the records of an endpoint, and every record written before prefixes had index partitions of their
     * own). Letters, digits and `_ . : -` only ('#' separates the key's parts).
     */
    keyPrefix?: string;
    /**
     * Whether records carry the sparse attention index's key (`attention_pk`, `attention_at`) while they need a look
     * (a lease running, UNKNOWN, NEEDS_REVIEW). Default true. With false nothing of the index is written: a table
     * without the index works, but the reconciler cannot find UNKNOWN records or stale leases and `ops list` cannot
     * list them (both refuse such a store, saying so).
     */
    attentionIndex?: boolean;
  }) {
    if (typeof options !== 'object' || options === null)
      throw new TypeError('DynamoDbIdempotencyStore: pass the options object: { client, tableName }');
    if ([options.client, options.awsSdkV3Client, options.clientConfig].filter((given) => given !== undefined).length > 1) {
      throw new TypeError('DynamoDbIdempotencyStore: pass one of client, awsSdkV3Client or clientConfig');
    }
    if (typeof options.tableName !== 'string' || options.tableName === '')
      throw new TypeError('DynamoDbIdempotencyStore: tableName must be a table name');
    const keyPrefix = options.keyPrefix ?? '';
    if (!/^[A-Za-z0-9_.:-]*$/.test(keyPrefix))
      throw new TypeError('DynamoDbIdempotencyStore: keyPrefix may contain only A-Z a-z 0-9 _ . : -');
    this.doc =
      options.client ??
      createDynamoDbClient(options.awsSdkV3Client ? { awsSdkV3Client: options.awsSdkV3Client } : { clientConfig: options.clientConfig });
    this.tableName = options.tableName;
    this.keyPrefix = keyPrefix;
    if (options.attentionIndex !== undefined && typeof options.attentionIndex !== 'boolean') {
      throw new TypeError('DynamoDbIdempotencyStore: attentionIndex must be true or false');
    }
    this.attentionIndex = options.attentionIndex ?? true;
    this.requests = new RecordRequests(this);
  }

  /** Implements the port's `IdempotencyStore.claim` (documented in `idempotent-mcp/engine`). */
  async claim(
    record: IdempotencyRecord,
    now: number,
    options: { onExpired?: IdempotencyPolicy['onExpired'] } = {},
  ): ReturnType<IdempotencyStore['claim']> {
    transition('ABSENT', 'claim');
    const key = this.requests.keyOf(record);
    let claim;
    try {
      claim = await claimByCondition(this.doc, { put: this.requests.putIfKeyIsFree(record, now, options) }, () => this.readItem(key));
    } catch (err) {
      throw unavailable('claim', err);
    }
    if (claim.claimed) return claim.retried ? { claimed: true, answerLost: true } : { claimed: true };
    const existing = itemToRecord(claim.existing);
    // Our own record: the SDK retried a claim whose first answer was lost after it was written.
    if (existing.status === 'PROCESSING' && existing.ownerToken === record.ownerToken) return { claimed: true, answerLost: true };
    return { claimed: false, existing };
  }

  /** Implements the port's `IdempotencyStore.commitOnce` (documented in `idempotent-mcp/engine`). */
  async commitOnce(
    record: IdempotencyRecord,
    now: number,
    options: { onExpired?: IdempotencyPolicy['onExpired'] } = {},
    writes: ExtraWrite[] = [],
  ): ReturnType<IdempotencyStore['commitOnce']> {
    transition(transition('ABSENT', 'claim'), record.status === 'SUCCEEDED' ? 'complete' : 'fail');
    try {
      // The SDK gives the transaction a ClientRequestToken and keeps it across its retries: a retry of a commit
      // whose answer was lost is the same transaction, answered as committed.
      await this.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { ...this.requests.putIfKeyIsFree(record, now, options), ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
            ...writes.map((w) => this.requests.createItem(w)),
          ],
        }),
      );
      return { committed: true };
    } catch (err) {
      const reasons = cancellationReasons(err);
      if (!reasons) throw unavailable('one-request commit', err);
      const ours = reasons[0];
      if (ours?.Code === 'ConditionalCheckFailed') {
        // ALL_OLD is always returned by DynamoDB; the read is a fallback for emulators that omit it.
        const existing = ours.Item ? itemToRecord(ours.Item) : await this.get(record);
        if (!existing) return { committed: false, contended: true }; // deleted in between: the key is free again
        // Our own record: a commit whose first answer was lost did apply.
        if (existing.ownerToken === record.ownerToken) return { committed: true };
        return { committed: false, existing };
      }
      if (reasons.some((r) => r.Code === 'TransactionConflict')) return { committed: false, contended: true };
      throw new TransactionRejectedError(reasons.map((r) => r.Code ?? 'None'));
    }
  }

  /** Implements the port's `IdempotencyStore.get` (documented in `idempotent-mcp/engine`). */
  async get(identity: RecordIdentity): Promise<IdempotencyRecord | undefined> {
    const item = await this.readItem(this.requests.keyOf(identity));
    return item ? itemToRecord(item) : undefined;
  }

  private async readItem(key: { pk: string; sk: string }): Promise<Item | undefined> {
    try {
      const { Item } = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: key, ConsistentRead: true }));
      return Item;
    } catch (err) {
      throw unavailable('read', err);
    }
  }

  /** Implements the port's `IdempotencyStore.settle` (documented in `idempotent-mcp/engine`). */
  async settle(
    identity: RecordIdentity,
    ownerToken: string,
    settlement: Parameters<IdempotencyStore['settle']>[2],
    now: number,
    writes: ExtraWrite[] = [],
  ): Promise<void> {
    const event = settlement.status === 'SUCCEEDED' ? 'complete' : 'fail';
    transition('PROCESSING', event);
    const update = this.requests.settleUpdate(identity, ownerToken, settlement, now);
    try {
      if (writes.length === 0) {
        await this.doc.send(new UpdateCommand(update));
      } else {
        await this.doc.send(
          new TransactWriteCommand({ TransactItems: [{ Update: update }, ...writes.map((w) => this.requests.createItem(w))] }),
        );
      }
    } catch (err) {
      if (isConditionRefusal(err)) throw new OwnershipLostError();
      const cancelled = cancellationReasons(err);
      if (cancelled) {
        const reasons = cancelled.map((r) => r.Code ?? 'None');
        if (reasons[0] === 'ConditionalCheckFailed') throw new OwnershipLostError();
        throw new TransactionRejectedError(reasons);
      }
      throw unavailable('completion', err);
    }
  }

  /** Implements the port's `IdempotencyStore.release` (documented in `idempotent-mcp/engine`). */
  async release(identity: RecordIdentity, ownerToken: string): Promise<boolean> {
    transition('PROCESSING', 'release');
    const fence = ownedFence('release', ownerToken);
    return this.conditional('release', () =>
      this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: this.requests.keyOf(identity),
          ConditionExpression: fence.clause,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: fence.values,
        }),
      ),
    );
  }

  /** Implements the port's `IdempotencyStore.markUnknown` (documented in `idempotent-mcp/engine`). */
  async markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'uncertain');
    return this.conditional('mark unknown', () =>
      this.doc.send(new UpdateCommand(this.requests.toUnknown(identity, ownedFence('uncertain', ownerToken), details, now))),
    );
  }

  /** Implements the port's `IdempotencyStore.takeOver` (documented in `idempotent-mcp/engine`). */
  async takeOver(
    identity: RecordIdentity,
    expectedOwnerToken: string,
    newOwnerToken: string,
    leaseExpiresAt: number,
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'take_over');
    const fence = ownedFence('take_over', expectedOwnerToken);
    return this.conditional('take over', () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: this.requests.keyOf(identity),
          UpdateExpression: `SET owner_token = :newOwner, lease_expires_at = :lease, updated_at = :now${this.attentionIndex ? ', attention_at = :lease' : ''}`,
          // The old lease must still be stale: a racing executor that renewed it keeps it.
          ConditionExpression: `${fence.clause} AND ${leasePassedClause('lease_expires_at')}`,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':newOwner': newOwnerToken, ':lease': leaseExpiresAt, ':now': now, ...fence.values },
        }),
      ),
    );
  }

  /** Implements the port's `IdempotencyStore.expireLease` (documented in `idempotent-mcp/engine`). */
  async expireLease(record: IdempotencyRecord, now: number, inFlightUntil: number): Promise<boolean> {
    transition('PROCESSING', 'lease_expired');
    const owned = ownedFence('lease_expired', record.ownerToken);
    // The lease as read, and passed: a live executor or a takeover keeps the record.
    const fence = {
      clause: `${owned.clause} AND lease_expires_at = :lease AND ${leasePassedClause('lease_expires_at')}`,
      values: { ...owned.values, ':lease': record.leaseExpiresAt },
    };
    const details = { error: LEASE_EXPIRED_ERROR, errorType: 'lease_expired' as const, nextCheckAt: now, inFlightUntil };
    return this.conditional('expire lease', () => this.doc.send(new UpdateCommand(this.requests.toUnknown(record, fence, details, now))));
  }

  /** Implements the port's `IdempotencyStore.reconcile` (documented in `idempotent-mcp/engine`). */
  async reconcile(record: IdempotencyRecord, outcome: Reconciliation, now: number): Promise<boolean> {
    const to = transition('UNKNOWN', outcome.event);
    const write = this.requests.resolution(record, outcome, to, readFence(record, outcome.event), now);
    return this.conditional(to === 'ABSENT' ? 'release after reconciliation' : 'reconcile', () =>
      this.doc.send('Delete' in write ? new DeleteCommand(write.Delete) : new UpdateCommand(write.Update)),
    );
  }

  /** Implements the port's `IdempotencyStore.deferReconcile` (documented in `idempotent-mcp/engine`). */
  async deferReconcile(
    record: IdempotencyRecord,
    nextCheckAt: number,
    reason: StoredError,
    now: number,
    options: { countsAsAttempt?: boolean } = {},
  ): Promise<boolean> {
    transition('UNKNOWN', 'reconcile_deferred');
    const fence = readFence(record, 'reconcile_deferred');
    const counted = options.countsAsAttempt !== false;
    // updated_at is left alone: it says since when the record is UNKNOWN (the age the alarm watches).
    return this.conditional('defer reconciliation', () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: this.requests.keyOf(record),
          UpdateExpression: `SET ${counted ? 'reconcile_attempts = :attempts, ' : ''}next_check_at = :next, #error = :error, last_checked_at = :now${this.attentionIndex ? ', attention_at = :next' : ''}`,
          ConditionExpression: fence.clause,
          ExpressionAttributeNames: { ...fence.names, '#error': 'error' },
          ExpressionAttributeValues: {
            ...fence.values,
            ...(counted ? { ':attempts': (record.reconcileAttempts ?? 0) + 1 } : {}),
            ':next': nextCheckAt,
            ':error': reason,
            ':now': now,
          },
        }),
      ),
    );
  }

  /** Implements the port's `ReviewStore.reviewLog` (documented in `idempotent-mcp/engine`). */
  async reviewLog(identity: RecordIdentity): Promise<ReviewLog> {
    try {
      const { Item } = await this.doc.send(
        new GetCommand({ TableName: this.tableName, Key: this.requests.reviewLogKey(identity), ConsistentRead: true }),
      );
      return { entries: (Item?.entries as ReviewEntry[] | undefined) ?? [], version: Number(Item?.version ?? 0) };
    } catch (err) {
      throw unavailable('read', err);
    }
  }

  /** Implements the port's `ReviewStore.decide` (documented in `idempotent-mcp/engine`). */
  async decide(record: IdempotencyRecord, log: ReviewLog, decision: OperatorDecision, entry: ReviewEntry, now: number): Promise<boolean> {
    const to = transition(record.status, decision.event);
    // The version `show` read: status, owner, attempts and the last update (attempts alone could come round again).
    const recordWrite = this.requests.resolution(record, decision, to, readFence(record, decision.event, { exact: true }), now);
    const logWrite = this.requests.reviewLogPut(record, log, entry, now);
    try {
      await this.doc.send(new TransactWriteCommand({ TransactItems: [recordWrite, logWrite] }));
      return true;
    } catch (err) {
      if (cancellationReasons(err)?.some((r) => r.Code === 'ConditionalCheckFailed')) return false;
      throw unavailable('review decision', err);
    }
  }

  /** Implements the port's `RecordQueries.assertQueryable` (documented in `idempotent-mcp/engine`). */
  assertQueryable(reader: string): void {
    if (!this.attentionIndex) throw new AttentionIndexOffError(reader);
  }

  /** Through the attention index: a Query per shard, never a table scan (eventually consistent). */
  async findAttention(
    status: Parameters<RecordQueries['findAttention']>[0],
    query: { dueBy?: number; limit: number },
  ): Promise<IdempotencyRecord[]> {
    this.assertQueryable('A query of the records that need a look');
    return this.recordsOf(
      await queryAttention(this.doc, this.tableName, ATTENTION_KIND[status], { ...query, scope: this.keyPrefix }),
      status,
    );
  }

  /** Implements the port's `RecordQueries.attentionPages` (documented in `idempotent-mcp/engine`). */
  async *attentionPages(
    status: Parameters<RecordQueries['attentionPages']>[0],
    query: { dueBy?: number; pageSize: number },
  ): AsyncIterable<IdempotencyRecord[]> {
    this.assertQueryable('A listing of the records that need a look');
    for await (const page of attentionPages(
      this.doc,
      this.tableName,
      ATTENTION_KIND[status],
      query.pageSize,
      query.dueBy,
      this.keyPrefix,
    )) {
      yield this.recordsOf(page, status);
    }
  }

  /** Implements the port's `RecordQueries.countAttention` (documented in `idempotent-mcp/engine`). */
  async countAttention(status: Parameters<RecordQueries['countAttention']>[0]): Promise<number> {
    this.assertQueryable('A count of the records that need a look');
    return countAttention(this.doc, this.tableName, ATTENTION_KIND[status], this.keyPrefix);
  }

  /**
   * The index's items that are this store's records and still in `status` (the index is read eventually consistent).
   * The queries read this store's own partitions of the index only (their keys carry its key prefix), so the filter
   * skips nothing but the moved-on.
   */
  private recordsOf(items: Item[], status: AttentionStatus): IdempotencyRecord[] {
    return items
      .filter((item) => isRecordItemOf(item, this.keyPrefix))
      .map(itemToRecord)
      .filter((record) => record.status === status);
  }

  private async conditional(action: string, send: () => Promise<unknown>): Promise<boolean> {
    try {
      await send();
      return true;
    } catch (err) {
      if (isConditionRefusal(err)) return false;
      throw unavailable(action, err);
    }
  }
}
