import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Keys } from '../core/keys';
import type { RecordIdentity } from '../engine/persistence';
import { TableSchema } from '../store/table-schema';
import type { PreparedLookup } from './policy';

/**
 * The lookup of one call (its templates filled from the call's arguments), written before the call is sent and read
 * by the reconciler when the answer was lost: the idempotency record keeps a fingerprint of the arguments, not the
 * arguments, and the upstream knows nothing of our key.
 */
export interface LookupMemo {
  /** `null`: the call cannot be checked (its arguments lack what a template names): a person decides. */
  put(identity: RecordIdentity, lookup: PreparedLookup | null, expiresAtSeconds: number): Promise<void>;
  /** undefined: no memo, so the call was never sent (the memo is written first). */
  get(identity: RecordIdentity): Promise<PreparedLookup | null | undefined>;
}

/** The memo's sort key, in the record's own partition (beside its review log). */
const SORT_KEY = 'GATEWAY_LOOKUP';

/** In the endpoint's table, beside the record; deleted by TTL with it. */
export class DynamoDbLookupMemo implements LookupMemo {
  constructor(private readonly options: { doc: DynamoDBDocumentClient; tableName: string }) {}

  async put(identity: RecordIdentity, lookup: PreparedLookup | null, expiresAtSeconds: number): Promise<void> {
    const { pk } = Keys.idempotency(identity.tenant, identity.tool, identity.idempotencyKey);
    await this.options.doc.send(
      new PutCommand({
        TableName: this.options.tableName,
        Item: { [TableSchema.partitionKey]: pk, [TableSchema.sortKey]: SORT_KEY, lookup, [TableSchema.ttlAttribute]: expiresAtSeconds },
      }),
    );
  }

  async get(identity: RecordIdentity): Promise<PreparedLookup | null | undefined> {
    const { pk } = Keys.idempotency(identity.tenant, identity.tool, identity.idempotencyKey);
    const { Item } = await this.options.doc.send(
      new GetCommand({ TableName: this.options.tableName, Key: { [TableSchema.partitionKey]: pk, [TableSchema.sortKey]: SORT_KEY }, ConsistentRead: true }),
    );
    return Item === undefined ? undefined : ((Item.lookup ?? null) as PreparedLookup | null);
  }
}
