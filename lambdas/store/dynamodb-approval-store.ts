import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type ApprovalRecord, approvalKey } from '../confirmation/core/approval';
import { AUDIT_LOG_RETENTION_SECONDS } from '../core/state-machine';
import { type ApprovalStore, decisionEntry, decisionRefused, useEntry } from '../confirmation/approval-store';
import { TableSchema } from './table-schema';
import type { RecordIdentity } from '../engine/persistence';

/** The log is an audit trail, kept as long as the review log after its last entry; DynamoDB TTL deletes it later. */
const ttlFrom = (nowMs: number) => Math.ceil(nowMs / 1000) + AUDIT_LOG_RETENTION_SECONDS;

/** An approval's key: in the partition of the record it is about, the store's `keyPrefix` included. */
function keyOf(binding: RecordIdentity, keyPrefix: string) {
  const key = approvalKey(binding);
  return { pk: `${keyPrefix}${key.pk}`, sk: key.sk };
}

const toItem = (record: ApprovalRecord, keyPrefix: string) => ({
  ...keyOf(record, keyPrefix),
  ...record,
  [TableSchema.ttlAttribute]: ttlFrom(record.createdAt),
});

function fromItem(item: Record<string, unknown> | undefined): ApprovalRecord | undefined {
  if (!item) return undefined;
  const { pk: _pk, sk: _sk, [TableSchema.ttlAttribute]: _ttl, ...record } = item;
  return record as unknown as ApprovalRecord;
}

/**
 * Approvals in the endpoint's table, beside the idempotency record they are about (lambdas/confirmation/core/approval.ts). One
 * item per operation: its current round and the log of every round. A new round is written only if the item is still
 * as read (same round, same status), so the log it carries forward holds every entry written before it.
 * @public
 */
export class DynamoDbApprovalStore implements ApprovalStore {
  private readonly client: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly keyPrefix: string;

  /** `options`: the document client, the table, the key prefix. */
  constructor(options: {
    /** The document client (`createDynamoDbClient()`, shared with the idempotency store). */
    client: DynamoDBDocumentClient;
    /** The idempotency store's table: each approval sits beside the record it is about. */
    tableName: string;
    /**
     * Whose approvals these are on a shared table: the idempotency store's `keyPrefix` (a gateway's upstream's), so
     * each approval sits in its record's partition and another gateway's calls, page and reconciler never read it.
     * Default none.
     */
    keyPrefix?: string;
  }) {
    this.client = options.client;
    this.tableName = options.tableName;
    const keyPrefix = options.keyPrefix ?? '';
    if (!/^[A-Za-z0-9_.:-]*$/.test(keyPrefix)) throw new TypeError('DynamoDbApprovalStore: keyPrefix may contain only A-Z a-z 0-9 _ . : -');
    this.keyPrefix = keyPrefix;
  }

  /** Implements the port's `ApprovalStore.current` (documented in `idempotent-mcp/engine`). */
  async current(binding: RecordIdentity): Promise<ApprovalRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: keyOf(binding, this.keyPrefix), ConsistentRead: true }),
    );
    return fromItem(Item);
  }

  /** Implements the port's `ApprovalStore.open` (documented in `idempotent-mcp/engine`). */
  async open(record: ApprovalRecord, previous: ApprovalRecord | undefined): Promise<ApprovalRecord> {
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: toItem(record, this.keyPrefix),
          ...(previous === undefined
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : {
                // A decision changes the status, a new round the nonce, a run's use the usedAt: any since the read, and
                // this round is not written (its log, carried forward from the read, would lose that entry).
                ConditionExpression: `nonce = :nonce AND #status = :status AND ${previous.usedAt === undefined ? 'attribute_not_exists(usedAt)' : 'usedAt = :usedAt'}`,
                ExpressionAttributeNames: { '#status': 'status' },
                ExpressionAttributeValues: {
                  ':nonce': previous.nonce,
                  ':status': previous.status,
                  ...(previous.usedAt === undefined ? {} : { ':usedAt': previous.usedAt }),
                },
              }),
        }),
      );
      return record;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      // Another call asked (or the person decided) first: that approval is the one the person sees.
      const winner = await this.current(record);
      if (!winner) throw err;
      return winner;
    }
  }

  /** Implements the port's `ApprovalStore.decide` (documented in `idempotent-mcp/engine`). */
  async decide(record: ApprovalRecord, decision: Parameters<ApprovalStore['decide']>[1]): ReturnType<ApprovalStore['decide']> {
    try {
      const { Attributes } = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keyOf(record, this.keyPrefix),
          UpdateExpression: 'SET #status = :status, decidedAt = :at, decidedBy = :by, #log = list_append(#log, :entry), #ttl = :ttl',
          ConditionExpression: 'nonce = :nonce AND #status = :pending AND expiresAt > :at AND #mode = :via',
          ExpressionAttributeNames: { '#status': 'status', '#log': 'log', '#mode': 'mode', '#ttl': TableSchema.ttlAttribute },
          ExpressionAttributeValues: {
            ':status': decision.status,
            ':at': decision.at,
            ':by': decision.by,
            ':entry': [decisionEntry(record, decision)],
            ':nonce': record.nonce,
            ':pending': 'pending',
            ':via': decision.via,
            ':ttl': ttlFrom(decision.at),
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { applied: true, record: fromItem(Attributes)! };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      // Refused by the condition: why, as the approval is now (a round changed meanwhile is 'unknown').
      return decisionRefused(await this.current(record), record.nonce, decision) ?? { applied: false, reason: 'unknown' };
    }
  }

  /** Implements the port's `ApprovalStore.use` (documented in `idempotent-mcp/engine`). */
  async use(record: ApprovalRecord, use: Parameters<ApprovalStore['use']>[1]): ReturnType<ApprovalStore['use']> {
    try {
      const { Attributes } = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keyOf(record, this.keyPrefix),
          UpdateExpression: 'SET usedAt = :at, usedBy = :by, #log = list_append(#log, :entry), #ttl = :ttl',
          // The rule `usable` states: this round, approved, used by no run.
          ConditionExpression: 'nonce = :nonce AND #status = :approved AND attribute_not_exists(usedAt)',
          ExpressionAttributeNames: { '#status': 'status', '#log': 'log', '#ttl': TableSchema.ttlAttribute },
          ExpressionAttributeValues: {
            ':at': use.at,
            ':by': use.by,
            ':entry': [useEntry(record, use)],
            ':nonce': record.nonce,
            ':approved': 'approved',
            ':ttl': ttlFrom(use.at),
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { applied: true, record: fromItem(Attributes)! };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      return { applied: false, record: await this.current(record) };
    }
  }
}
