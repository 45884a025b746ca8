import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type ApprovalRecord, approvalKey } from '../core/approval';
import type { ApprovalStore, DecideResult } from '../engine/approval-store';
import { TableSchema } from './table-schema';

/** Kept a week past its expiry for the review of what was approved; DynamoDB TTL deletes it later. */
const KEEP_AFTER_EXPIRY_SECONDS = 7 * 24 * 3600;

type Binding = { tenant: string; tool: string; idempotencyKey: string };

const toItem = (record: ApprovalRecord) => ({
  ...approvalKey(record),
  ...record,
  [TableSchema.ttlAttribute]: Math.ceil(record.expiresAt / 1000) + KEEP_AFTER_EXPIRY_SECONDS,
});

function fromItem(item: Record<string, unknown> | undefined): ApprovalRecord | undefined {
  if (!item) return undefined;
  const { pk: _pk, sk: _sk, [TableSchema.ttlAttribute]: _ttl, ...record } = item;
  return record as unknown as ApprovalRecord;
}

export interface DynamoDbApprovalStoreOptions {
  /** The document client (`createDynamoDbClient()`, shared with the idempotency store). */
  client: DynamoDBDocumentClient;
  /** The idempotency store's table (the shape in `TableSchema`): each approval sits beside the record it is about. */
  tableName: string;
}

/**
 * Approvals in the endpoint's table, beside the idempotency record they are about (lambdas/core/approval.ts). One
 * item per operation: the current approval, replaced (conditionally) when a new one is asked for.
 */
export class DynamoDbApprovalStore implements ApprovalStore {
  private readonly client: DynamoDBDocumentClient;
  private readonly tableName: string;

  constructor(options: DynamoDbApprovalStoreOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
  }

  async current(binding: Binding): Promise<ApprovalRecord | undefined> {
    const { Item } = await this.client.send(new GetCommand({ TableName: this.tableName, Key: approvalKey(binding), ConsistentRead: true }));
    return fromItem(Item);
  }

  async open(record: ApprovalRecord, replacing: string | undefined): Promise<ApprovalRecord> {
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: toItem(record),
          ...(replacing === undefined
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : { ConditionExpression: 'nonce = :replacing', ExpressionAttributeValues: { ':replacing': replacing } }),
        }),
      );
      return record;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      // Another call asked first: its approval is the one the person sees.
      const winner = await this.current(record);
      if (!winner) throw err;
      return winner;
    }
  }

  async decide(binding: Binding, nonce: string, decision: { status: 'approved' | 'declined'; by: string; at: number }): Promise<DecideResult> {
    try {
      const { Attributes } = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: approvalKey(binding),
          UpdateExpression: 'SET #status = :status, decidedAt = :at, decidedBy = :by, #log = list_append(#log, :entry)',
          ConditionExpression: 'nonce = :nonce AND #status = :pending AND expiresAt > :at',
          ExpressionAttributeNames: { '#status': 'status', '#log': 'log' },
          ExpressionAttributeValues: {
            ':status': decision.status,
            ':at': decision.at,
            ':by': decision.by,
            ':entry': [{ at: decision.at, event: decision.status, by: decision.by }],
            ':nonce': nonce,
            ':pending': 'pending',
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { applied: true, record: fromItem(Attributes)! };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const record = await this.current(binding);
      if (!record || record.nonce !== nonce) return { applied: false, reason: 'unknown' };
      return record.status === 'pending' ? { applied: false, reason: 'expired', record } : { applied: false, reason: 'decided', record };
    }
  }
}
