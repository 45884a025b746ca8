import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Keys } from '../core/keys';
import type { RecordIdentity, RecordMemos } from '../engine/persistence';
import { TableSchema } from './table-schema';

/** A memo's sort key, in the record's own partition (beside its review log): read with the key, deleted by TTL. */
const sortKeyOf = (name: string) => `MEMO#${name}`;

/** Record memos in the endpoint's table. */
export class DynamoDbRecordMemos implements RecordMemos {
  constructor(private readonly options: { doc: DynamoDBDocumentClient; tableName: string }) {}

  async put(identity: RecordIdentity, name: string, value: unknown, expiresAtSeconds: number): Promise<void> {
    const { pk } = Keys.idempotency(identity.tenant, identity.tool, identity.idempotencyKey);
    await this.options.doc.send(
      new PutCommand({
        TableName: this.options.tableName,
        Item: { [TableSchema.partitionKey]: pk, [TableSchema.sortKey]: sortKeyOf(name), value, [TableSchema.ttlAttribute]: expiresAtSeconds },
      }),
    );
  }

  async get(identity: RecordIdentity, name: string): Promise<unknown> {
    const { pk } = Keys.idempotency(identity.tenant, identity.tool, identity.idempotencyKey);
    const { Item } = await this.options.doc.send(
      new GetCommand({ TableName: this.options.tableName, Key: { [TableSchema.partitionKey]: pk, [TableSchema.sortKey]: sortKeyOf(name) }, ConsistentRead: true }),
    );
    return Item === undefined ? undefined : (Item.value ?? null);
  }
}
