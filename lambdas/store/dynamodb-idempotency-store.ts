import {
  ConditionalCheckFailedException,
  TransactionCanceledException,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { OwnershipLostError, StoreUnavailableError, TransactionRejectedError } from '../core/errors';
import { transition, type IdempotencyRecord } from '../core/state-machine';
import type { ClaimResult, ExtraWrite, IdempotencyStore, RecordIdentity, Settlement } from '../engine/persistence';
import { attentionPk, Keys, TableSchema } from './table-schema';

type Item = Record<string, unknown>;

const keyOf = (id: RecordIdentity) => Keys.idempotency(id.tenant, id.tool, id.idempotencyKey);

export function recordToItem(record: IdempotencyRecord): Item {
  const key = keyOf(record);
  const item: Item = {
    ...key,
    tenant: record.tenant,
    tool: record.tool,
    idempotency_key: record.idempotencyKey,
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
  };
  if (record.status === 'PROCESSING') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('LEASE', key.pk);
    item[TableSchema.attentionIndex.sortKey] = record.leaseExpiresAt;
  } else if (record.status === 'UNKNOWN') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('UNKNOWN', key.pk);
    item[TableSchema.attentionIndex.sortKey] = record.nextCheckAt ?? record.updatedAt;
  }
  return item;
}

export function itemToRecord(item: Item): IdempotencyRecord {
  const opt = <T>(name: string) => (item[name] === undefined || item[name] === null ? undefined : (item[name] as T));
  return {
    tenant: item.tenant as string,
    tool: item.tool as string,
    idempotencyKey: item.idempotency_key as string,
    fingerprint: item.fingerprint as string,
    status: item.status as IdempotencyRecord['status'],
    ownerToken: item.owner_token as string,
    createdAt: Number(item.created_at),
    updatedAt: Number(item.updated_at),
    leaseExpiresAt: Number(item.lease_expires_at),
    retainUntil: Number(item.retain_until),
    expiresAt: Number(item[TableSchema.ttlAttribute]),
    traceId: opt('trace_id'),
    result: opt('result'),
    error: opt('error'),
    errorType: opt('error_type'),
    reconcileAttempts: opt<number>('reconcile_attempts'),
    nextCheckAt: opt<number>('next_check_at'),
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

const OWNED_PROCESSING = '#status = :processing AND owner_token = :owner';

/**
 * The DynamoDB adapter of the idempotency store: one conditional request per state transition.
 * A replay or a conflict costs exactly the failed claim (the existing item comes back with the failure).
 */
export class DynamoDbIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    readonly tableName: string,
  ) {}

  async claim(record: IdempotencyRecord, now: number): Promise<ClaimResult> {
    transition('ABSENT', 'claim');
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: recordToItem(record),
          // An expired settled record frees its key; the expiry is compared here because TTL deletes late.
          ConditionExpression: 'attribute_not_exists(pk) OR (#expires < :nowSeconds AND #status IN (:succeeded, :failed))',
          ExpressionAttributeNames: { '#expires': TableSchema.ttlAttribute, '#status': 'status' },
          ExpressionAttributeValues: {
            ':nowSeconds': Math.floor(now / 1000),
            ':succeeded': 'SUCCEEDED',
            ':failed': 'FAILED',
          },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { claimed: true };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) {
        const old = (err as { Item?: Record<string, AttributeValue> }).Item;
        // ALL_OLD is always returned by DynamoDB; the read is a fallback for emulators that omit it.
        const existing = old ? itemToRecord(unmarshall(old)) : await this.get(record);
        if (existing) return { claimed: false, existing };
        return this.claim(record, now);
      }
      throw unavailable('claim', err);
    }
  }

  async get(identity: RecordIdentity): Promise<IdempotencyRecord | undefined> {
    try {
      const { Item } = await this.doc.send(
        new GetCommand({ TableName: this.tableName, Key: keyOf(identity), ConsistentRead: true }),
      );
      return Item ? itemToRecord(Item) : undefined;
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
    transition('PROCESSING', settlement.status === 'SUCCEEDED' ? 'complete' : 'fail');
    const update = {
      TableName: this.tableName,
      Key: keyOf(identity),
      UpdateExpression:
        'SET #status = :status, updated_at = :now, #result = :result, #error = :error, error_type = :errorType REMOVE attention_pk, attention_at',
      ConditionExpression: OWNED_PROCESSING,
      ExpressionAttributeNames: { '#status': 'status', '#result': 'result', '#error': 'error' },
      ExpressionAttributeValues: {
        ':status': settlement.status,
        ':now': now,
        ':result': settlement.result ?? null,
        ':error': settlement.error ?? null,
        ':errorType': settlement.errorType ?? null,
        ':processing': 'PROCESSING',
        ':owner': ownerToken,
      },
    };
    try {
      if (writes.length === 0) {
        await this.doc.send(new UpdateCommand(update));
      } else {
        await this.doc.send(new TransactWriteCommand({ TransactItems: [{ Update: update }, ...writes] }));
      }
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) throw new OwnershipLostError();
      if (err instanceof TransactionCanceledException) {
        const reasons = err.CancellationReasons?.map((r) => r.Code) ?? [];
        if (reasons[0] === 'ConditionalCheckFailed') throw new OwnershipLostError();
        throw new TransactionRejectedError(reasons);
      }
      throw unavailable('completion', err);
    }
  }

  async release(identity: RecordIdentity, ownerToken: string): Promise<boolean> {
    transition('PROCESSING', 'release');
    return this.conditional('release', () =>
      this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: keyOf(identity),
          ConditionExpression: OWNED_PROCESSING,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':processing': 'PROCESSING', ':owner': ownerToken },
        }),
      ),
    );
  }

  async markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: { code: string; message: string }; errorType: IdempotencyRecord['errorType']; nextCheckAt: number },
    now: number,
  ): Promise<boolean> {
    transition('PROCESSING', 'uncertain');
    const pk = keyOf(identity).pk;
    return this.conditional('mark unknown', () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keyOf(identity),
          UpdateExpression:
            'SET #status = :unknown, updated_at = :now, #error = :error, error_type = :errorType, next_check_at = :next, attention_pk = :attention, attention_at = :next',
          ConditionExpression: OWNED_PROCESSING,
          ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
          ExpressionAttributeValues: {
            ':unknown': 'UNKNOWN',
            ':now': now,
            ':error': details.error,
            ':errorType': details.errorType ?? null,
            ':next': details.nextCheckAt,
            ':attention': attentionPk('UNKNOWN', pk),
            ':processing': 'PROCESSING',
            ':owner': ownerToken,
          },
        }),
      ),
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
    return this.conditional('take over', () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keyOf(identity),
          UpdateExpression:
            'SET owner_token = :newOwner, lease_expires_at = :lease, attention_at = :lease, updated_at = :now',
          // The old lease must still be stale: a racing executor that renewed it keeps it.
          ConditionExpression: `${OWNED_PROCESSING} AND lease_expires_at <= :now`,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':newOwner': newOwnerToken,
            ':lease': leaseExpiresAt,
            ':now': now,
            ':processing': 'PROCESSING',
            ':owner': expectedOwnerToken,
          },
        }),
      ),
    );
  }

  private async conditional(action: string, send: () => Promise<unknown>): Promise<boolean> {
    try {
      await send();
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw unavailable(action, err);
    }
  }
}
