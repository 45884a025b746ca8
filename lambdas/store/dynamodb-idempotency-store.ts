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
  type ReviewEntry,
  type StoredError,
  type TransitionEvent,
} from '../core/state-machine';
import type {
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
import { cancellationReasons, isConditionRefusal, type Item } from './refusals';
import { attentionPk, Keys, TableSchema, type AttentionKind } from './table-schema';


const keyOf = (id: RecordIdentity, keyPrefix = '') => {
  const key = Keys.idempotency(id.tenant, id.tool, id.idempotencyKey);
  return keyPrefix ? { pk: `${keyPrefix}${key.pk}`, sk: key.sk } : key;
};

type TransactWriteItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

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
   * Put before every record's partition key, for a table shared with other data. Default none. Letters, digits and
   * `_ . : -` only ('#' separates the key's parts).
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

/**
 * Tenant, tool and key live in the item's key (`IDEM#tenant#tool#key`; '#' cannot occur in them) and are not
 * repeated as attributes: every claim sends the item and every replay reads it back.
 */
export function recordToItem(record: IdempotencyRecord, keyPrefix = '', attentionIndex = true): Item {
  const key = keyOf(record, keyPrefix);
  // Properties listed one by one: `{ ...key, <15 more> }` costs tens of microseconds in V8 (Node 20), on every claim.
  const item: Item = {
    pk: key.pk,
    sk: key.sk,
    fingerprint: record.fingerprint,
    status: record.status,
    owner_token: record.ownerToken,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
    lease_expires_at: record.leaseExpiresAt,
    retain_until: record.retainUntil,
    [TableSchema.ttlAttribute]: record.expiresAt,
    trace_id: record.traceId,
    result: record.result,
    error: record.error,
    error_type: record.errorType,
    reconcile_attempts: record.reconcileAttempts,
    next_check_at: record.nextCheckAt,
    in_flight_until: record.inFlightUntil,
  };
  if (!attentionIndex) return item;
  if (record.status === 'PROCESSING') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('LEASE', key.pk);
    item[TableSchema.attentionIndex.sortKey] = record.leaseExpiresAt;
  } else if (record.status === 'UNKNOWN') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('UNKNOWN', key.pk);
    item[TableSchema.attentionIndex.sortKey] = record.nextCheckAt ?? record.updatedAt;
  } else if (record.status === 'NEEDS_REVIEW') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('REVIEW', key.pk);
    item[TableSchema.attentionIndex.sortKey] = record.updatedAt;
  }
  return item;
}

export function itemToRecord(item: Item): IdempotencyRecord {
  const opt = <T>(name: string) => (item[name] === undefined || item[name] === null ? undefined : (item[name] as T));
  const [, tenant, tool, idempotencyKey] = String(item.pk).split('#');
  return {
    tenant: tenant as string,
    tool: tool as string,
    idempotencyKey: idempotencyKey as string,
    fingerprint: item.fingerprint as string,
    status: item.status as IdempotencyRecord['status'],
    ownerToken: item.owner_token as string,
    createdAt: Number(item.created_at),
    updatedAt: Number(item.updated_at),
    leaseExpiresAt: Number(item.lease_expires_at),
    retainUntil: Number(item.retain_until),
    // UNKNOWN and NEEDS_REVIEW records carry no TTL: deleting them would free a key whose effect may exist.
    expiresAt: item[TableSchema.ttlAttribute] === undefined ? Number.POSITIVE_INFINITY : Number(item[TableSchema.ttlAttribute]),
    traceId: opt('trace_id'),
    result: opt('result'),
    error: opt('error'),
    errorType: opt('error_type'),
    reconcileAttempts: opt<number>('reconcile_attempts'),
    nextCheckAt: opt<number>('next_check_at'),
    inFlightUntil: opt<number>('in_flight_until'),
  };
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

type StoreWriteEvent = Exclude<TransitionEvent, 'claim' | 'expire' | 'operator_settled_found' | 'operator_settled_absent' | 'operator_settled_absent_fail' | 'operator_recheck'>;
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
 */
export class DynamoDbIdempotencyStore implements IdempotencyStore, ReviewStore {
  /** The document client the store writes with (the outbox and the tools' writes may share it). */
  readonly doc: DynamoDBDocumentClient;
  readonly tableName: string;
  readonly keyPrefix: string;
  /** False: no attention index attributes are written (see `DynamoDbStoreOptions.attentionIndex`). */
  readonly attentionIndex: boolean;

  constructor(options: DynamoDbStoreOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('DynamoDbIdempotencyStore: pass the options object: { client, tableName }');
    if ([options.client, options.awsSdkV3Client, options.clientConfig].filter((given) => given !== undefined).length > 1) {
      throw new TypeError('DynamoDbIdempotencyStore: pass one of client, awsSdkV3Client or clientConfig');
    }
    if (typeof options.tableName !== 'string' || options.tableName === '') throw new TypeError('DynamoDbIdempotencyStore: tableName must be a table name');
    const keyPrefix = options.keyPrefix ?? '';
    if (!/^[A-Za-z0-9_.:-]*$/.test(keyPrefix)) throw new TypeError('DynamoDbIdempotencyStore: keyPrefix may contain only A-Z a-z 0-9 _ . : -');
    this.doc =
      options.client ?? createDynamoDbClient(options.awsSdkV3Client ? { awsSdkV3Client: options.awsSdkV3Client } : { clientConfig: options.clientConfig });
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
    return { set: `, attention_pk = :attention, attention_at = ${at}`, values: { ':attention': attentionPk(kind, pk) } };
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

  async commitOnce(record: IdempotencyRecord, now: number, options: ClaimOptions = {}, writes: ExtraWrite[] = []): Promise<CommitOnceResult> {
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
    return { TableName: this.tableName, Item: recordToItem(record, this.keyPrefix, this.attentionIndex), ...renderKeyIsFree(now, options.onExpired) };
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
      this.doc.send(new DeleteCommand({
        TableName: this.tableName,
        Key: this.keyOf(identity),
        ConditionExpression: fence.clause,
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: fence.values,
      })),
    );
  }

  async markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: { code: string; message: string }; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'uncertain');
    const key = this.keyOf(identity);
    const fence = ownedFence('uncertain', ownerToken);
    const attention = this.attentionSet('UNKNOWN', key.pk, ':next');
    return this.conditional('mark unknown', () =>
      this.doc.send(new UpdateCommand({
        TableName: this.tableName,
        Key: key,
        UpdateExpression: `SET #status = :unknown, updated_at = :now, #error = :error, error_type = :errorType, next_check_at = :next, in_flight_until = :inFlight${attention.set} REMOVE #expires`,
        ConditionExpression: fence.clause,
        ExpressionAttributeNames: { '#status': 'status', '#error': 'error', '#expires': TableSchema.ttlAttribute },
        ExpressionAttributeValues: {
          ':unknown': 'UNKNOWN',
          ':now': now,
          ':error': details.error,
          ':errorType': details.errorType ?? null,
          ':next': details.nextCheckAt,
          ':inFlight': details.inFlightUntil,
          ...attention.values,
          ...fence.values,
        },
      })),
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
      this.doc.send(new UpdateCommand({
        TableName: this.tableName,
        Key: this.keyOf(identity),
        UpdateExpression: `SET owner_token = :newOwner, lease_expires_at = :lease, updated_at = :now${this.attentionIndex ? ', attention_at = :lease' : ''}`,
        // The old lease must still be stale: a racing executor that renewed it keeps it.
        ConditionExpression: `${fence.clause} AND ${leasePassedClause('lease_expires_at')}`,
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':newOwner': newOwnerToken, ':lease': leaseExpiresAt, ':now': now, ...fence.values },
      })),
    );
  }

  async expireLease(record: IdempotencyRecord, now: number, inFlightUntil: number): Promise<boolean> {
    transition('PROCESSING', 'lease_expired');
    const key = this.keyOf(record);
    const fence = ownedFence('lease_expired', record.ownerToken);
    const attention = this.attentionSet('UNKNOWN', key.pk, ':now');
    return this.conditional('expire lease', () =>
      this.doc.send(new UpdateCommand({
        TableName: this.tableName,
        Key: key,
        UpdateExpression: `SET #status = :unknown, updated_at = :now, #error = :error, error_type = :errorType, next_check_at = :now, in_flight_until = :inFlight${attention.set} REMOVE #expires`,
        ConditionExpression: `${fence.clause} AND lease_expires_at = :lease AND ${leasePassedClause('lease_expires_at')}`,
        ExpressionAttributeNames: { '#status': 'status', '#error': 'error', '#expires': TableSchema.ttlAttribute },
        ExpressionAttributeValues: {
          ':unknown': 'UNKNOWN',
          ':now': now,
          ':inFlight': inFlightUntil,
          ':error': { code: 'OUTCOME_UNKNOWN', message: 'the executor stopped before recording an outcome' },
          ':errorType': 'lease_expired',
          ':lease': record.leaseExpiresAt,
          ...attention.values,
          ...fence.values,
        },
      })),
    );
  }

  async reconcile(record: IdempotencyRecord, outcome: Reconciliation, now: number): Promise<boolean> {
    const to = transition('UNKNOWN', outcome.event);
    const key = this.keyOf(record);
    const fence = this.versionFence(record, outcome.event);
    if (outcome.event === 'reconciled_absent') {
      return this.conditional('release after reconciliation', () =>
        this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: key, ...fence })),
      );
    }
    const values: Record<string, unknown> = { ':to': to, ':now': now };
    let set = '#status = :to, updated_at = :now';
    if (to === 'SUCCEEDED' || to === 'FAILED') {
      const retention = retentionFromNow(record, now);
      set += ', retain_until = :retain, #expires = :expires';
      values[':retain'] = retention.retainUntil;
      values[':expires'] = retention.expiresAt;
    }
    let remove = [...this.attentionRemove, 'next_check_at'];
    if (outcome.event === 'reconciled_found') {
      set += ', #result = :result';
      values[':result'] = outcome.result ?? null;
      remove.push('#error', 'error_type');
    } else {
      set += ', #error = :error, error_type = :errorType';
      values[':error'] = outcome.error;
      values[':errorType'] = outcome.event === 'reconcile_exhausted' ? 'reconcile_exhausted' : 'terminal';
    }
    if (outcome.event === 'reconcile_exhausted') {
      // Parked records stay in the index (their own kind) so the reconciler can count them for the alarm.
      const attention = this.attentionSet('REVIEW', key.pk, ':now');
      set += `, reconcile_attempts = :attempts${attention.set}`;
      values[':attempts'] = (record.reconcileAttempts ?? 0) + 1;
      Object.assign(values, attention.values);
      remove = ['next_check_at'];
    }
    return this.conditional('reconcile', () =>
      this.doc.send(new UpdateCommand({
        TableName: this.tableName,
        Key: key,
        UpdateExpression: `SET ${set}${removeClause(remove)}`,
        ConditionExpression: fence.ConditionExpression,
        ExpressionAttributeNames: {
          ...fence.ExpressionAttributeNames,
          ...(outcome.event === 'reconciled_found' ? { '#result': 'result' } : {}),
          '#error': 'error',
          ...(to === 'SUCCEEDED' || to === 'FAILED' ? { '#expires': TableSchema.ttlAttribute } : {}),
        },
        ExpressionAttributeValues: { ...fence.ExpressionAttributeValues, ...values },
      })),
    );
  }

  async deferReconcile(record: IdempotencyRecord, nextCheckAt: number, reason: StoredError, now: number, options: { countsAsAttempt?: boolean } = {}): Promise<boolean> {
    transition('UNKNOWN', 'reconcile_deferred');
    const fence = this.versionFence(record, 'reconcile_deferred');
    const counted = options.countsAsAttempt !== false;
    // updated_at is left alone: it says since when the record is UNKNOWN (the age the alarm watches).
    return this.conditional('defer reconciliation', () =>
      this.doc.send(new UpdateCommand({
        TableName: this.tableName,
        Key: this.keyOf(record),
        UpdateExpression: `SET ${counted ? 'reconcile_attempts = :attempts, ' : ''}next_check_at = :next, #error = :error, last_checked_at = :now${this.attentionIndex ? ', attention_at = :next' : ''}`,
        ConditionExpression: fence.ConditionExpression,
        ExpressionAttributeNames: { ...fence.ExpressionAttributeNames, '#error': 'error' },
        ExpressionAttributeValues: {
          ...fence.ExpressionAttributeValues,
          ...(counted ? { ':attempts': (record.reconcileAttempts ?? 0) + 1 } : {}),
          ':next': nextCheckAt,
          ':error': reason,
          ':now': now,
        },
      })),
    );
  }

  async reviewLog(identity: RecordIdentity): Promise<ReviewLog> {
    try {
      const { Item } = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: this.reviewLogKey(identity), ConsistentRead: true }));
      return { entries: (Item?.entries as ReviewEntry[] | undefined) ?? [], version: Number(Item?.version ?? 0) };
    } catch (err) {
      throw unavailable('read', err);
    }
  }

  async decide(record: IdempotencyRecord, log: ReviewLog, decision: OperatorDecision, entry: ReviewEntry, now: number): Promise<boolean> {
    const to = transition(record.status, decision.event);
    const key = this.keyOf(record);
    // The version `show` read: status, owner, attempts and the last update (attempts alone could come round again).
    const attempts = record.reconcileAttempts;
    const fence = {
      ConditionExpression: `#status = :from AND owner_token = :owner AND updated_at = :readUpdatedAt AND ${
        attempts === undefined ? 'attribute_not_exists(reconcile_attempts)' : 'reconcile_attempts = :readAttempts'
      }`,
      names: { '#status': 'status' } as Record<string, string>,
      values: {
        ':from': record.status,
        ':owner': record.ownerToken,
        ':readUpdatedAt': record.updatedAt,
        ...(attempts === undefined ? {} : { ':readAttempts': attempts }),
      } as Record<string, unknown>,
    };
    let recordWrite: TransactWriteItem;
    if (decision.event === 'operator_settled_absent') {
      recordWrite = {
        Delete: {
          TableName: this.tableName,
          Key: key,
          ConditionExpression: fence.ConditionExpression,
          ExpressionAttributeNames: fence.names,
          ExpressionAttributeValues: fence.values,
        },
      };
    } else {
      const names: Record<string, string> = { ...fence.names, '#error': 'error' };
      const values: Record<string, unknown> = { ...fence.values, ':to': to, ':now': now };
      let set = '#status = :to, updated_at = :now';
      let remove: string[];
      if (decision.event === 'operator_recheck') {
        const attention = this.attentionSet('UNKNOWN', key.pk, ':now');
        set += `, next_check_at = :now, #error = :error${attention.set}`;
        Object.assign(values, attention.values);
        values[':error'] = OPERATOR_RECHECK_ERROR;
        remove = ['reconcile_attempts'];
      } else {
        const retention = retentionFromNow(record, now);
        set += ', retain_until = :retain, #expires = :expires';
        names['#expires'] = TableSchema.ttlAttribute;
        values[':retain'] = retention.retainUntil;
        values[':expires'] = retention.expiresAt;
        remove = [...this.attentionRemove, 'next_check_at'];
        if (decision.event === 'operator_settled_found') {
          set += ', #result = :result';
          names['#result'] = 'result';
          values[':result'] = decision.result ?? null;
          remove.push('#error', 'error_type');
        } else if (decision.event === 'operator_settled_absent_fail') {
          set += ', #error = :error, error_type = :errorType';
          values[':error'] = decision.error;
          values[':errorType'] = 'terminal';
        }
      }
      recordWrite = {
        Update: {
          TableName: this.tableName,
          Key: key,
          UpdateExpression: `SET ${set}${removeClause(remove)}`,
          ConditionExpression: fence.ConditionExpression,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        },
      };
    }
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

  /** A tool's own item as a transaction Put that refuses to overwrite. */
  private createItem({ create }: ExtraWrite) {
    return { Put: { TableName: create.table ?? this.tableName, Item: { ...create.item, ...create.key }, ConditionExpression: 'attribute_not_exists(pk)' } };
  }

  /** The version the reconciler read: `event` legal from its status, same owner, same number of attempts. */
  private versionFence(record: IdempotencyRecord, event: StoreWriteEvent) {
    const attempts = record.reconcileAttempts;
    const owned = ownedFence(event, record.ownerToken);
    return {
      ConditionExpression: `${owned.clause} AND ${
        attempts === undefined ? 'attribute_not_exists(reconcile_attempts)' : 'reconcile_attempts = :readAttempts'
      }`,
      ExpressionAttributeNames: { '#status': 'status' } as Record<string, string>,
      ExpressionAttributeValues: { ...owned.values, ...(attempts === undefined ? {} : { ':readAttempts': attempts }) } as Record<string, unknown>,
    };
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
