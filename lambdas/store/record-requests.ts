import {
  appendReviewEntry,
  AUDIT_LOG_RETENTION_SECONDS,
  OPERATOR_RECHECK_ERROR,
  retentionFromNow,
  transition,
  type IdempotencyRecord,
  type RecordState,
  type ReviewEntry,
  type StoredError,
} from '../core/state-machine';
import type {
  ClaimOptions,
  ExtraWrite,
  OperatorDecision,
  Reconciliation,
  RecordIdentity,
  ReviewLog,
  Settlement,
} from '../engine/persistence';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { ownedFence, removeClause, renderKeyIsFree, type ExpressionValues, type ReadFence } from './record-conditions';
import { recordKeyOf, recordToItem } from './record-item';
import { attentionPk, Keys, TableSchema, type AttentionKind } from './table-schema';

type TransactWriteItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** Where a store's records live: its table, its key prefix, and whether the attention index's attributes are written. */
export interface RecordTable {
  readonly tableName: string;
  readonly keyPrefix: string;
  readonly attentionIndex: boolean;
}

/**
 * What each of the DynamoDB store's writes says, as requests for one table: the keys, the updates and their
 * attention index attributes. The store (dynamodb-idempotency-store.ts) sends them and reads the answers.
 */
export class RecordRequests {
  constructor(private readonly table: RecordTable) {}

  /** `SET` clauses putting the record into the index under `kind`, due at the expression value `at`; none when off. */
  attentionSet(kind: AttentionKind, pk: string, at: string): { set: string; values: ExpressionValues } {
    if (!this.table.attentionIndex) return { set: '', values: {} };
    return {
      set: `, attention_pk = :attention, attention_at = ${at}`,
      values: { ':attention': attentionPk(kind, pk, this.table.keyPrefix) },
    };
  }

  /** The index attributes to remove when a record needs no look any more; none when the index is off. */
  get attentionRemove(): string[] {
    return this.table.attentionIndex ? ['attention_pk', 'attention_at'] : [];
  }

  keyOf(identity: RecordIdentity) {
    return recordKeyOf(identity, this.table.keyPrefix);
  }

  /** Beside the record, in its partition (prefix included). */
  reviewLogKey(identity: RecordIdentity) {
    return { pk: this.keyOf(identity).pk, sk: Keys.reviewLog(identity.tenant, identity.tool, identity.idempotencyKey).sk };
  }

  /** The record's put, conditioned on its key being free: the core's key-expiry rule, rendered. */
  putIfKeyIsFree(record: IdempotencyRecord, now: number, options: ClaimOptions) {
    return {
      TableName: this.table.tableName,
      Item: recordToItem(record, this.table.keyPrefix, this.table.attentionIndex),
      ...renderKeyIsFree(now, options.onExpired),
    };
  }

  /** A tool's own item as a transaction Put that refuses to overwrite. */
  createItem({ create }: ExtraWrite) {
    return {
      Put: {
        TableName: create.table ?? this.table.tableName,
        Item: { ...create.item, ...create.key },
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    };
  }

  /** A settlement's update, fenced on the owner token: only what the settlement has. */
  settleUpdate(identity: RecordIdentity, ownerToken: string, settlement: Settlement, now: number) {
    const event = settlement.status === 'SUCCEEDED' ? 'complete' : 'fail';
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
      TableName: this.table.tableName,
      Key: this.keyOf(identity),
      UpdateExpression: `SET ${set}${removeClause(this.attentionRemove)}`,
      ConditionExpression: fence.clause,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    };
    return update;
  }

  /**
   * PROCESSING to UNKNOWN, queued for the reconciler at `nextCheckAt`: the one update of `markUnknown` (its owner)
   * and `expireLease` (anyone, once the lease read has passed), which differ in their fence only. The TTL goes:
   * deleting an UNKNOWN record would free a key whose effect may exist.
   */
  toUnknown(
    identity: RecordIdentity,
    fence: { clause: string; values: ExpressionValues },
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number; inFlightUntil: number },
    now: number,
  ) {
    const key = this.keyOf(identity);
    const attention = this.attentionSet('UNKNOWN', key.pk, ':next');
    return {
      TableName: this.table.tableName,
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

  /** The review log with `entry` appended, put only over the version read (`log.version`). */
  reviewLogPut(record: RecordIdentity, log: ReviewLog, entry: ReviewEntry, now: number): TransactWriteItem {
    return {
      Put: {
        TableName: this.table.tableName,
        Item: {
          ...this.reviewLogKey(record),
          entries: appendReviewEntry(log.entries, entry),
          version: log.version + 1,
          [TableSchema.ttlAttribute]: Math.floor(now / 1000) + AUDIT_LOG_RETENTION_SECONDS,
        },
        // Another person's decision in between changes the version: theirs stands, ours is not written.
        ConditionExpression: log.version === 0 ? 'attribute_not_exists(pk)' : 'version = :version',
        ...(log.version === 0 ? {} : { ExpressionAttributeValues: { ':version': log.version } }),
      },
    };
  }

  /**
   * An outcome settled for an UNKNOWN or NEEDS_REVIEW record, by the reconciler (`reconcile`) or a person (`decide`):
   * the one write of both, by the state the table sends the record to (`to`), fenced on the version read.
   * ABSENT: the record is deleted (a retry executes). SUCCEEDED or FAILED: replayed for a full retention from now,
   * the TTL with it. NEEDS_REVIEW: parked (one more attempt counted). UNKNOWN: checked again from now, attempts reset.
   */
  resolution(
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
          TableName: this.table.tableName,
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
        TableName: this.table.tableName,
        Key: key,
        UpdateExpression: `SET ${set}${removeClause(remove)}`,
        ConditionExpression: fence.clause,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      },
    };
  }
}
