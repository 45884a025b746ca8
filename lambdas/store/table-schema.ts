import { createHash } from 'node:crypto';
import {
  CreateTableCommand,
  DescribeTableCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { isTableInUse } from './refusals';

/**
 * One table holds idempotency records, the business items committed with them (orders), and outbox events,
 * so a tool's writes and its SUCCEEDED record commit in one transaction. The CDK construct and the local
 * setup both read this, so the deployed and the local table cannot drift apart.
 */
export const TableSchema = {
  partitionKey: 'pk',
  sortKey: 'sk',
  /** Epoch seconds; DynamoDB TTL deletes late (and DynamoDB Local never), so conditions compare it too. */
  ttlAttribute: 'expires_at',
  /**
   * Sparse index of what needs attention (stale leases, UNKNOWN records, undelivered outbox events):
   * only such items carry `attention_pk`, so the reconciler queries it instead of scanning the table.
   */
  attentionIndex: { name: 'attention', partitionKey: 'attention_pk', sortKey: 'attention_at' },
} as const;

/** The attention index is written on every claim; shards keep that write load off a single partition. */
const ATTENTION_SHARDS = 4;
/**
 * REVIEW holds NEEDS_REVIEW records: nothing acts on them, but the reconciler counts them for the alarm.
 * UNDELIVERED holds outbox events given up on (the sweep's last send, the dead-letter queue) until a redrive
 * delivers them: nothing acts on them either, the review tool lists them.
 */
export type AttentionKind = 'LEASE' | 'UNKNOWN' | 'OUTBOX' | 'REVIEW' | 'UNDELIVERED';

/**
 * The index partition of an item of `kind` with partition key `pk`. `scope` (a store's key prefix) gives the records
 * of each store on a shared table partitions of their own, `KIND#scope#shard`, so a store's queries read its own
 * records only, never another's to skip them (a gateway's reconciler never sees another upstream's records). The
 * unscoped partitions, `KIND#shard`, are the unprefixed store's, and those of every item written before scopes.
 */
export function attentionPk(kind: AttentionKind, pk: string, scope = ''): string {
  const shard = createHash('sha1').update(pk).digest().readUInt8(0) % ATTENTION_SHARDS;
  return scope ? `${kind}#${scope}#${shard}` : `${kind}#${shard}`;
}

export function attentionPartitions(kind: AttentionKind, scope = ''): string[] {
  return Array.from({ length: ATTENTION_SHARDS }, (_, shard) => (scope ? `${kind}#${scope}#${shard}` : `${kind}#${shard}`));
}

export { Keys } from '../core/keys';

/**
 * Creates the table (and its TTL) if it does not exist, of the schema the toolkit writes (`IdempotentMcpEndpoint`'s
 * table's): partition key `pk` and sort key `sk` (strings), TTL on `expires_at`, and the sparse global secondary
 * index `attention` (`attention_pk` string, `attention_at` number, all attributes). Used by `npm start`, tests and
 * benchmarks.
 *
 * @public
 */
export async function ensureTable(client: DynamoDBDocumentClient, tableName: string): Promise<void> {
  const { partitionKey, sortKey, attentionIndex, ttlAttribute } = TableSchema;
  try {
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: partitionKey, AttributeType: 'S' },
          { AttributeName: sortKey, AttributeType: 'S' },
          { AttributeName: attentionIndex.partitionKey, AttributeType: 'S' },
          { AttributeName: attentionIndex.sortKey, AttributeType: 'N' },
        ],
        KeySchema: [
          { AttributeName: partitionKey, KeyType: 'HASH' },
          { AttributeName: sortKey, KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes: [
          {
            IndexName: attentionIndex.name,
            KeySchema: [
              { AttributeName: attentionIndex.partitionKey, KeyType: 'HASH' },
              { AttributeName: attentionIndex.sortKey, KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'ALL' },
          },
        ],
      }),
    );
  } catch (err) {
    if (!isTableInUse(err)) throw err;
    // Created by someone else (a second `npm start`, another test file): it may still be CREATING.
    await untilActive(client, tableName);
    return;
  }
  await untilActive(client, tableName);
  await client.send(
    new UpdateTimeToLiveCommand({ TableName: tableName, TimeToLiveSpecification: { AttributeName: ttlAttribute, Enabled: true } }),
  );
}

/**
 * Whether the table exists (DescribeTable): false when DynamoDB says there is no such table; any other failure
 * (unreachable, no credentials, no permission) is thrown as DynamoDB gave it.
 */
export async function tableExists(client: DynamoDBDocumentClient, tableName: string): Promise<boolean> {
  try {
    await client.send(new DescribeTableCommand({ TableName: tableName }));
    return true;
  } catch (err) {
    if ((err as Error)?.name === 'ResourceNotFoundException') return false;
    throw err;
  }
}

/** How long a new table (with its index) may take to become ACTIVE before `ensureTable` gives up. */
const TABLE_ACTIVE_WAIT_SECONDS = 120;

/**
 * The SDK's waiter: until DescribeTable says ACTIVE (the index created with a table is part of it), and an error
 * when it does not become ACTIVE in time; never a return before the table takes writes.
 */
async function untilActive(client: DynamoDBDocumentClient, tableName: string): Promise<void> {
  // The document client sends the base client's commands (it shares its config): the waiter only calls DescribeTable.
  await waitUntilTableExists(
    { client: client as unknown as DynamoDBClient, maxWaitTime: TABLE_ACTIVE_WAIT_SECONDS, minDelay: 1, maxDelay: 5 },
    { TableName: tableName },
  );
}
