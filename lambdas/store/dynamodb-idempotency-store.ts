import { OwnershipLostError, StoreUnavailableError, TransactionRejectedError } from '../core/errors';
import {
  keyExpiryRule,
  appendReviewEntry,
  AUDIT_LOG_RETENTION_SECONDS,
  OPERATOR_RECHECK_ERROR,
  retentionFromNow,
  storedStatesAllowing,
  transition,
  type ExpiryPolicy,
  type IdempotencyRecord,
  type RecordState,
  type ReviewEntry,
  type StoredError,
  type TransitionEvent,
} from '../core/state-machine';
import type {
  AttentionQuery,
  AttentionStatus,
  ClaimOptions,
  ClaimResult,
  CommitOnceResult,
  ExtraWrite,
  IdempotencyStore,
  OperatorDecision,
  Reconciliation,
  RecordIdentity,
  ReviewLog,
  ReviewStore,
  RecordQueries,
  Settlement,
} from '../engine/persistence';
import type { DynamoDBClient, DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  GetCommand,
  TransactWriteCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { createDynamoDbClient } from './clients';
import { claimByCondition, leasePassedClause } from './conditional-claim';
import { AttentionIndexOffError, attentionPages, countAttention, queryAttention } from './attention-index';
import { isRecordItemOf, itemToRecord, recordKeyOf, recordToItem } from './record-item';
import { cancellationReasons, isConditionRefusal, type Item } from './refusals';
import { attentionPk, Keys, TableSchema, type AttentionKind } from './table-schema';

const keyOf = recordKeyOf;

type TransactWriteItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/**
 * Options of `DynamoDbIdempotencyStore`: the document client, the table, the key prefix, the attention index.
 * @public
 */
export interface DynamoDbStoreOptions {
  /**
   * The document client to use (`createDynamoDbClient()`, shared with the outbox and the tools' own writes). One of
   * `client`, `awsSdkV3Client` or `clientConfig`; with none, a client made by `createDynamoDbClient()`.
   */
  client?: DynamoDBDocumentClient;
  /** Your own AWS SDK DynamoDB client, used as configured (as Powertools' `DynamoDBPersistenceLayer` takes it). */
  awsSdkV3Client?: DynamoDBClient;
  /** Settings over `DynamoDbClientDefaults` for a client made here (as Powertools' `clientConfig`). */
  clientConfig?: DynamoDBClientConfig;
  /** The table, of the shape in `TableSchema` (the IdempotencyTable construct creates one). */
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
}

/** Errors that prove DynamoDB refused the request, so it was not applied. Anything else may have been. */
function isDefiniteRejection(err: unknown): boolean {
  const name = (err as { name?: string })?.name ?? '';
  return /ValidationException|ResourceNotFoundException|AccessDenied|ItemCollectionSizeLimitExceeded/.test(name);
}

function unavailable(action: string, err: unknown): Error {
  if (isDefiniteRejection(err)) return err as Error;
  return new StoreUnavailableError(`DynamoDB ${action} failed: ${(err as Error)?.name ?? 'error'}`, { cause: err });
}

type ExpressionValues = Record<string, unknown>;

/**
 * Each write's status condition, rendered from the transition table (`storedStatesAllowing`): the states the write's
 * event may start from. Changing the table changes the conditions; the conformance suite checks both stores
 * against the table.
 */
function renderFromStates(event: TransitionEvent): { clause: string; values: ExpressionValues } {
  const states = storedStatesAllowing(event);
  if (states.length === 0) throw new Error(`the transition table allows ${event} from no stored state`);
  const names = states.map((_, i) => `:from${i}`);
  return {
    clause: names.length === 1 ? `#status = ${names[0]}` : `#status IN (${names.join(', ')})`,
    values: Object.fromEntries(states.map((state, i) => [names[i], state])),
  };
}

/** Every write but the claim (whose condition is the key-expiry rule, `renderKeyIsFree`); `expire` is TTL's. */
type StoreWriteEvent = Exclude<TransitionEvent, 'claim' | 'expire'>;
/** A fence on a record as read: its condition, with the names and values it uses. */
interface ReadFence {
  clause: string;
  names: Record<string, string>;
  values: ExpressionValues;
}

/** Where the attention index keeps records of each status that needs a look. */
const ATTENTION_KIND: Record<AttentionStatus, AttentionKind> = { PROCESSING: 'LEASE', UNKNOWN: 'UNKNOWN', NEEDS_REVIEW: 'REVIEW' };

/** The error an UNKNOWN record carries when its executor's lease passed without an outcome. */
const LEASE_EXPIRED_ERROR: StoredError = { code: 'OUTCOME_UNKNOWN', message: 'the executor stopped before recording an outcome' };
/** Rendered once per event: settle runs on every call. */
const FROM_STATES = new Map<StoreWriteEvent, { clause: string; values: ExpressionValues }>();
const fromStatesOf = (event: StoreWriteEvent) => FROM_STATES.get(event) ?? FROM_STATES.set(event, renderFromStates(event)).get(event)!;

/** `event`'s status condition and the owner token's fence (the record is the writer's). */
function ownedFence(event: StoreWriteEvent, ownerToken: string) {
  const from = fromStatesOf(event);
  return { clause: `${from.clause} AND owner_token = :owner`, values: { ...from.values, ':owner': ownerToken } };
}

/**
 * The core's key-expiry rule (`keyExpiryRule`) as the claim condition: no item, or a record in one of the rule's
 * statuses whose deciding attribute is at or before the rule's bound.
 */
function renderKeyIsFree(now: number, onExpired: ExpiryPolicy['onExpired'] | undefined) {
  const rule = keyExpiryRule(now, onExpired);
  const statusNames = rule.statuses.map((_, i) => `:free${i}`);
  return {
    ConditionExpression: `attribute_not_exists(pk) OR (#status IN (${statusNames.join(', ')}) AND #freeAfter <= :freeAtOrBefore)`,
    ExpressionAttributeNames: { '#status': 'status', '#freeAfter': RECORD_ATTRIBUTE[rule.field] },
    ExpressionAttributeValues: {
      ...Object.fromEntries(rule.statuses.map((status, i) => [statusNames[i], status])),
      ':freeAtOrBefore': rule.freeAtOrBefore,
    },
  };
}

/** The item attribute of each record field a condition compares. */
const RECORD_ATTRIBUTE = { retainUntil: 'retain_until', expiresAt: TableSchema.ttlAttribute } as const;

const removeClause = (attributes: string[]) => (attributes.length === 0 ? '' : ` REMOVE ${attributes.join(', ')}`);

/**
 * The DynamoDB adapter of the idempotency store: one conditional request per state transition.
 * A replay or a conflict costs exactly the failed claim (the existing item comes back with the failure).
 * @public
 */
export class DynamoDbIdempotencyStore implements IdempotencyStore, ReviewStore, RecordQueries {
  /** The document client the store writes with (the outbox and the tools' writes may share it). */
  readonly doc: DynamoDBDocumentClient;
  readonly tableName: string;
  readonly keyPrefix: string;
  /** False: no attention index attributes are written (see `DynamoDbStoreOptions.attentionIndex`). */
  readonly attentionIndex: boolean;

  constructor(options: DynamoDbStoreOptions) {
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
  }

  /** `SET` clauses putting the record into the index under `kind`, due at the expression value `at`; none when off. */
  private attentionSet(kind: AttentionKind, pk: string, at: string): { set: string; values: ExpressionValues } {
    if (!this.attentionIndex) return { set: '', values: {} };
    return { set: `, attention_pk = :attention, attention_at = ${at}`, values: { ':attention': attentionPk(kind, pk, this.keyPrefix) } };
  }

  /** The index attributes to remove when a record needs no look any more; none when the index is off. */
  private get attentionRemove(): string[] {
    return this.attentionIndex ? ['attention_pk', 'attention_at'] : [];
  }

  private keyOf(identity: RecordIdentity) {
    return keyOf(identity, this.keyPrefix);
  }

  /** Beside the record, in its partition (prefix included). */
  private reviewLogKey(identity: RecordIdentity) {
    return { pk: this.keyOf(identity).pk, sk: Keys.reviewLog(identity.tenant, identity.tool, identity.idempotencyKey).sk };
  }

  async claim(record: IdempotencyRecord, now: number, options: ClaimOptions = {}): Promise<ClaimResult> {
    transition('ABSENT', 'claim');
    const key = this.keyOf(record);
    let claim;
    try {
      claim = await claimByCondition(this.doc, { put: this.putIfKeyIsFree(record, now, options) }, () => this.readItem(key));
    } catch (err) {
      throw unavailable('claim', err);
    }
    if (claim.claimed) return claim.retried ? { claimed: true, answerLost: true } : { claimed: true };
    const existing = itemToRecord(claim.existing);
    // Our own record: the SDK retried a claim whose first answer was lost after it was written.
    if (existing.status === 'PROCESSING' && existing.ownerToken === record.ownerToken) return { claimed: true, answerLost: true };
    return { claimed: false, existing };
  }

  async commitOnce(
    record: IdempotencyRecord,
    now: number,
    options: ClaimOptions = {},
    writes: ExtraWrite[] = [],
  ): Promise<CommitOnceResult> {
    transition(transition('ABSENT', 'claim'), record.status === 'SUCCEEDED' ? 'complete' : 'fail');
    try {
      // The SDK gives the transaction a ClientRequestToken and keeps it across its retries: a retry of a commit
      // whose answer was lost is the same transaction, answered as committed.
      await this.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { ...this.putIfKeyIsFree(record, now, options), ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
            ...writes.map((w) => this.createItem(w)),
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

  /** The record's put, conditioned on its key being free: the core's key-expiry rule, rendered. */
  private putIfKeyIsFree(record: IdempotencyRecord, now: number, options: ClaimOptions) {
    return {
      TableName: this.tableName,
      Item: recordToItem(record, this.keyPrefix, this.attentionIndex),
      ...renderKeyIsFree(now, options.onExpired),
    };
  }

  async get(identity: RecordIdentity): Promise<IdempotencyRecord | undefined> {
    const item = await this.readItem(this.keyOf(identity));
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

  async settle(
    identity: RecordIdentity,
    ownerToken: string,
    settlement: Settlement,
    now: number,
    writes: ExtraWrite[] = [],
  ): Promise<void> {
    const event = settlement.status === 'SUCCEEDED' ? 'complete' : 'fail';
    transition('PROCESSING', event);
    const fence = ownedFence(event, ownerToken);
    // Only what the settlement has: NULL placeholders would ride along in every replay's answer.
    const names: Record<string, string> = { '#status': 'status' };
    const values: Record<string, unknown> = { ':status': settlement.status, ':now': now, ...fence.values };
    let set = '#status = :status, updated_at = :now';
    if (settlement.result !== undefined) {
      set += ', #result = :result';
      names['#result'] = 'result';
      values[':result'] = settlement.result;
    }
    if (settlement.error !== undefined) {
      set += ', #error = :error';
      names['#error'] = 'error';
      values[':error'] = settlement.error;
    }
    if (settlement.errorType !== undefined) {
      set += ', error_type = :errorType';
      values[':errorType'] = settlement.errorType;
    }
    const update = {
      TableName: this.tableName,
      Key: this.keyOf(identity),
      UpdateExpression: `SET ${set}${removeClause(this.attentionRemove)}`,
      ConditionExpression: fence.clause,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    };
    try {
      if (writes.length === 0) {
        await this.doc.send(new UpdateCommand(update));
      } else {
        await this.doc.send(new TransactWriteCommand({ TransactItems: [{ Update: update }, ...writes.map((w) => this.createItem(w))] }));
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

  async release(identity: RecordIdentity, ownerToken: string): Promise<boolean> {
    transition('PROCESSING', 'release');
    const fence = ownedFence('release', ownerToken);
    return this.conditional('release', () =>
      this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: this.keyOf(identity),
          ConditionExpression: fence.clause,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: fence.values,
        }),
      ),
    );
  }

  async markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'uncertain');
    return this.conditional('mark unknown', () =>
      this.doc.send(new UpdateCommand(this.toUnknown(identity, ownedFence('uncertain', ownerToken), details, now))),
    );
  }

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
          Key: this.keyOf(identity),
          UpdateExpression: `SET owner_token = :newOwner, lease_expires_at = :lease, updated_at = :now${this.attentionIndex ? ', attention_at = :lease' : ''}`,
          // The old lease must still be stale: a racing executor that renewed it keeps it.
          ConditionExpression: `${fence.clause} AND ${leasePassedClause('lease_expires_at')}`,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':newOwner': newOwnerToken, ':lease': leaseExpiresAt, ':now': now, ...fence.values },
        }),
      ),
    );
  }

  async expireLease(record: IdempotencyRecord, now: number, inFlightUntil: number): Promise<boolean> {
    transition('PROCESSING', 'lease_expired');
    const owned = ownedFence('lease_expired', record.ownerToken);
    // The lease as read, and passed: a live executor or a takeover keeps the record.
    const fence = {
      clause: `${owned.clause} AND lease_expires_at = :lease AND ${leasePassedClause('lease_expires_at')}`,
      values: { ...owned.values, ':lease': record.leaseExpiresAt },
    };
    const details = { error: LEASE_EXPIRED_ERROR, errorType: 'lease_expired' as const, nextCheckAt: now, inFlightUntil };
    return this.conditional('expire lease', () => this.doc.send(new UpdateCommand(this.toUnknown(record, fence, details, now))));
  }

  /**
   * PROCESSING to UNKNOWN, queued for the reconciler at `nextCheckAt`: the one update of `markUnknown` (its owner)
   * and `expireLease` (anyone, once the lease read has passed), which differ in their fence only. The TTL goes:
   * deleting an UNKNOWN record would free a key whose effect may exist.
   */
  private toUnknown(
    identity: RecordIdentity,
    fence: { clause: string; values: ExpressionValues },
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ) {
    const key = this.keyOf(identity);
    const attention = this.attentionSet('UNKNOWN', key.pk, ':next');
    return {
      TableName: this.tableName,
      Key: key,
      UpdateExpression: `SET #status = :unknown, updated_at = :now, #error = :error, error_type = :errorType, next_check_at = :next, in_flight_until = :inFlight${attention.set} REMOVE #expires`,
      ConditionExpression: fence.clause,
      ExpressionAttributeNames: { '#status': 'status', '#error': 'error', '#expires': TableSchema.ttlAttribute },
      ExpressionAttributeValues: {
        ':unknown': transition('PROCESSING', 'uncertain'),
        ':now': now,
        ':error': details.error,
        ':errorType': details.errorType ?? null,
        ':next': details.nextCheckAt,
        ':inFlight': details.inFlightUntil,
        ...attention.values,
        ...fence.values,
      },
    };
  }

  async reconcile(record: IdempotencyRecord, outcome: Reconciliation, now: number): Promise<boolean> {
    const to = transition('UNKNOWN', outcome.event);
    const write = this.resolution(record, outcome, to, this.readFence(record, outcome.event), now);
    return this.conditional(to === 'ABSENT' ? 'release after reconciliation' : 'reconcile', () =>
      this.doc.send('Delete' in write ? new DeleteCommand(write.Delete) : new UpdateCommand(write.Update)),
    );
  }

  async deferReconcile(
    record: IdempotencyRecord,
    nextCheckAt: number,
    reason: StoredError,
    now: number,
    options: { countsAsAttempt?: boolean } = {},
  ): Promise<boolean> {
    transition('UNKNOWN', 'reconcile_deferred');
    const fence = this.readFence(record, 'reconcile_deferred');
    const counted = options.countsAsAttempt !== false;
    // updated_at is left alone: it says since when the record is UNKNOWN (the age the alarm watches).
    return this.conditional('defer reconciliation', () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: this.keyOf(record),
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

  async reviewLog(identity: RecordIdentity): Promise<ReviewLog> {
    try {
      const { Item } = await this.doc.send(
        new GetCommand({ TableName: this.tableName, Key: this.reviewLogKey(identity), ConsistentRead: true }),
      );
      return { entries: (Item?.entries as ReviewEntry[] | undefined) ?? [], version: Number(Item?.version ?? 0) };
    } catch (err) {
      throw unavailable('read', err);
    }
  }

  async decide(record: IdempotencyRecord, log: ReviewLog, decision: OperatorDecision, entry: ReviewEntry, now: number): Promise<boolean> {
    const to = transition(record.status, decision.event);
    // The version `show` read: status, owner, attempts and the last update (attempts alone could come round again).
    const recordWrite = this.resolution(record, decision, to, this.readFence(record, decision.event, { exact: true }), now);
    const logKey = this.reviewLogKey(record);
    const logWrite: TransactWriteItem = {
      Put: {
        TableName: this.tableName,
        Item: {
          ...logKey,
          entries: appendReviewEntry(log.entries, entry),
          version: log.version + 1,
          [TableSchema.ttlAttribute]: Math.floor(now / 1000) + AUDIT_LOG_RETENTION_SECONDS,
        },
        // Another person's decision in between changes the version: theirs stands, ours is not written.
        ConditionExpression: log.version === 0 ? 'attribute_not_exists(pk)' : 'version = :version',
        ...(log.version === 0 ? {} : { ExpressionAttributeValues: { ':version': log.version } }),
      },
    };
    try {
      await this.doc.send(new TransactWriteCommand({ TransactItems: [recordWrite, logWrite] }));
      return true;
    } catch (err) {
      if (cancellationReasons(err)?.some((r) => r.Code === 'ConditionalCheckFailed')) return false;
      throw unavailable('review decision', err);
    }
  }

  /**
   * An outcome settled for an UNKNOWN or NEEDS_REVIEW record, by the reconciler (`reconcile`) or a person (`decide`):
   * the one write of both, by the state the table sends the record to (`to`), fenced on the version read.
   * ABSENT: the record is deleted (a retry executes). SUCCEEDED or FAILED: replayed for a full retention from now,
   * the TTL with it. NEEDS_REVIEW: parked (one more attempt counted). UNKNOWN: checked again from now, attempts reset.
   */
  private resolution(
    record: IdempotencyRecord,
    outcome: Reconciliation | OperatorDecision,
    to: RecordState,
    fence: ReadFence,
    now: number,
  ): { Delete: NonNullable<TransactWriteItem['Delete']> } | { Update: NonNullable<TransactWriteItem['Update']> } {
    const key = this.keyOf(record);
    const names: Record<string, string> = { ...fence.names };
    const values: ExpressionValues = { ...fence.values };
    if (to === 'ABSENT') {
      return {
        Delete: {
          TableName: this.tableName,
          Key: key,
          ConditionExpression: fence.clause,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        },
      };
    }
    names['#error'] = 'error';
    values[':to'] = to;
    values[':now'] = now;
    let set = '#status = :to, updated_at = :now';
    let remove: string[];
    if (to === 'SUCCEEDED' || to === 'FAILED') {
      const retention = retentionFromNow(record, now);
      set += ', retain_until = :retain, #expires = :expires';
      names['#expires'] = TableSchema.ttlAttribute;
      values[':retain'] = retention.retainUntil;
      values[':expires'] = retention.expiresAt;
      remove = [...this.attentionRemove, 'next_check_at'];
      if (to === 'SUCCEEDED') {
        set += ', #result = :result';
        names['#result'] = 'result';
        values[':result'] = ('result' in outcome ? outcome.result : undefined) ?? null;
        remove.push('#error', 'error_type');
      } else {
        set += ', #error = :error, error_type = :errorType';
        values[':error'] = 'error' in outcome ? outcome.error : undefined;
        values[':errorType'] = 'terminal';
      }
    } else if (to === 'NEEDS_REVIEW') {
      // Parked records stay in the index (their own kind) so the reconciler can count them for the alarm.
      const attention = this.attentionSet('REVIEW', key.pk, ':now');
      set += `, #error = :error, error_type = :errorType, reconcile_attempts = :attempts${attention.set}`;
      values[':error'] = 'error' in outcome ? outcome.error : undefined;
      values[':errorType'] = 'reconcile_exhausted';
      values[':attempts'] = (record.reconcileAttempts ?? 0) + 1;
      Object.assign(values, attention.values);
      remove = ['next_check_at'];
    } else {
      // Back to UNKNOWN (a person's recheck): due now, with fresh attempts.
      const attention = this.attentionSet('UNKNOWN', key.pk, ':now');
      set += `, next_check_at = :now, #error = :error${attention.set}`;
      values[':error'] = OPERATOR_RECHECK_ERROR;
      Object.assign(values, attention.values);
      remove = ['reconcile_attempts'];
    }
    return {
      Update: {
        TableName: this.tableName,
        Key: key,
        UpdateExpression: `SET ${set}${removeClause(remove)}`,
        ConditionExpression: fence.clause,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      },
    };
  }

  assertQueryable(reader: string): void {
    if (!this.attentionIndex) throw new AttentionIndexOffError(reader);
  }

  /** Through the attention index: a Query per shard, never a table scan (eventually consistent). */
  async findAttention(status: AttentionStatus, query: AttentionQuery & { limit: number }): Promise<IdempotencyRecord[]> {
    this.assertQueryable('A query of the records that need a look');
    return this.recordsOf(
      await queryAttention(this.doc, this.tableName, ATTENTION_KIND[status], { ...query, scope: this.keyPrefix }),
      status,
    );
  }

  async *attentionPages(status: AttentionStatus, query: AttentionQuery & { pageSize: number }): AsyncIterable<IdempotencyRecord[]> {
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

  async countAttention(status: AttentionStatus): Promise<number> {
    this.assertQueryable('A count of the records that need a look');
    return countAttention(this.doc, this.tableName, ATTENTION_KIND[status], this.keyPrefix);
  }

  /**
   * The index's items that are this store's records and still in `status` (the index is read eventually consistent).
   * The queries read this store's own partitions only (`attentionPk`), so the filter skips nothing but the moved-on.
   */
  private recordsOf(items: Item[], status: AttentionStatus): IdempotencyRecord[] {
    return items
      .filter((item) => isRecordItemOf(item, this.keyPrefix))
      .map(itemToRecord)
      .filter((record) => record.status === status);
  }

  /** A tool's own item as a transaction Put that refuses to overwrite. */
  private createItem({ create }: ExtraWrite) {
    return {
      Put: {
        TableName: create.table ?? this.tableName,
        Item: { ...create.item, ...create.key },
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    };
  }

  /**
   * The version `record` was read at, for a write making `event`: the states the table allows `event` from, the
   * owner token and the reconcile attempts (the reconciler's fence); `exact` (a person's decision) adds the status
   * and the last update as read, since attempts alone could come round again.
   */
  private readFence(record: IdempotencyRecord, event: StoreWriteEvent, { exact = false } = {}): ReadFence {
    const attempts = record.reconcileAttempts;
    const owned = ownedFence(event, record.ownerToken);
    const clauses = [
      owned.clause,
      attempts === undefined ? 'attribute_not_exists(reconcile_attempts)' : 'reconcile_attempts = :readAttempts',
    ];
    const values: ExpressionValues = { ...owned.values, ...(attempts === undefined ? {} : { ':readAttempts': attempts }) };
    if (exact) {
      clauses.push('#status = :readStatus', 'updated_at = :readUpdatedAt');
      values[':readStatus'] = record.status;
      values[':readUpdatedAt'] = record.updatedAt;
    }
    return { clause: clauses.join(' AND '), names: { '#status': 'status' }, values };
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
