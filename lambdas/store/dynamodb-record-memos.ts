import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RecordIdentity, RecordMemos } from '../engine/persistence';
import { recordKeyOf } from './record-item';
import { TableSchema } from './table-schema';

/** A memo's sort key, in the record's own partition (beside its review log): read with the key, deleted by TTL. */
const sortKeyOf = (name: string) => `MEMO#${name}`;

/**
 * Record memos in the endpoint's table, in the partition of the record (its store's `keyPrefix` included): what a
 * gateway keeps beside a record to reconcile it later (the lookup it will ask the upstream).
 * @public
 */
export class DynamoDbRecordMemos implements RecordMemos {
  constructor(private readonly options: { doc: DynamoDBDocumentClient; tableName: string; keyPrefix?: string }) {}

  /** Implements the port's `RecordMemos.put` (documented in `idempotent-mcp/engine`). */
  async put(identity: RecordIdentity, name: string, value: unknown, expiresAtSeconds: number): Promise<void> {
    const { pk } = recordKeyOf(identity, this.options.keyPrefix);
    await this.options.doc.send(
      new PutCommand({
        TableName: this.options.tableName,
        Item: {
          [TableSchema.partitionKey]: pk,
          [TableSchema.sortKey]: sortKeyOf(name),
          value,
          [TableSchema.ttlAttribute]: expiresAtSeconds,
        },
      }),
    );
  }

  /** Implements the port's `RecordMemos.get` (documented in `idempotent-mcp/engine`). */
  async get(identity: RecordIdentity, name: string): Promise<unknown> {
    const { pk } = recordKeyOf(identity, this.options.keyPrefix);
    const { Item } = await this.options.doc.send(
      new GetCommand({
        TableName: this.options.tableName,
        Key: { [TableSchema.partitionKey]: pk, [TableSchema.sortKey]: sortKeyOf(name) },
        ConsistentRead: true,
      }),
    );
    return Item === undefined ? undefined : (Item.value ?? null);
  }
}
