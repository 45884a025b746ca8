import { paginateQuery, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Item } from './refusals';
import { attentionPartitions, TableSchema, type AttentionKind } from './table-schema';

/**
 * What reads the index asks of a store created with `attentionIndex: false` (DynamoDbIdempotencyStore).
 */
export class AttentionIndexOffError extends Error {
  constructor(reader: string) {
    super(
      `${reader} reads the attention index, but the idempotency store was created with attentionIndex: false, so no ` +
        'record carries the index key and nothing could be found. Create the store with attentionIndex: true (the ' +
        "default) on a table that has the index (the global secondary index 'attention', as ensureTable creates it).",
    );
    this.name = 'AttentionIndexOffError';
  }
}

export interface AttentionQuery {
  /** Only items whose `attention_at` is at or before this (epoch ms); all when unset. */
  dueBy?: number;
  /** Upper bound of items returned over all shards (oldest first within each shard). */
  limit: number;
  /** Only the partitions of this scope (a store's key prefix: `attentionPk`); default the unscoped ones. */
  scope?: string;
}

/**
 * Reads the sparse attention index: only items that need a look carry its key, so this is a Query per shard,
 * never a table scan. Results are eventually consistent; every write that acts on them is conditional.
 */
export async function queryAttention(
  doc: DynamoDBDocumentClient,
  tableName: string,
  kind: AttentionKind,
  query: AttentionQuery,
): Promise<Item[]> {
  const { name, partitionKey, sortKey } = TableSchema.attentionIndex;
  const perShard = await Promise.all(
    attentionPartitions(kind, query.scope).map(async (partition) => {
      const items: Item[] = [];
      const pages = paginateQuery(
        { client: doc },
        {
          Limit: query.limit,
          TableName: tableName,
          IndexName: name,
          KeyConditionExpression: query.dueBy === undefined ? '#pk = :pk' : '#pk = :pk AND #at <= :due',
          ExpressionAttributeNames: { '#pk': partitionKey, ...(query.dueBy === undefined ? {} : { '#at': sortKey }) },
          ExpressionAttributeValues: { ':pk': partition, ...(query.dueBy === undefined ? {} : { ':due': query.dueBy }) },
        },
      );
      for await (const page of pages) {
        items.push(...(page.Items ?? []));
        if (items.length >= query.limit) break;
      }
      return items;
    }),
  );
  return perShard
    .flat()
    .sort((a, b) => Number(a[sortKey]) - Number(b[sortKey]))
    .slice(0, query.limit);
}

/** How many items of a kind are in the index, in `scope`'s partitions (a COUNT query per shard: no items are read back). */
export async function countAttention(doc: DynamoDBDocumentClient, tableName: string, kind: AttentionKind, scope?: string): Promise<number> {
  const { name, partitionKey } = TableSchema.attentionIndex;
  let total = 0;
  for (const partition of attentionPartitions(kind, scope)) {
    const pages = paginateQuery(
      { client: doc },
      {
        TableName: tableName,
        IndexName: name,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': partitionKey },
        ExpressionAttributeValues: { ':pk': partition },
        Select: 'COUNT',
      },
    );
    for await (const page of pages) total += page.Count ?? 0;
  }
  return total;
}

/**
 * Every item of a kind, one page of one shard at a time: a listing that filters as it goes reads no more than it
 * needs (the review tool), and still never scans the table.
 */
export async function* attentionPages(
  doc: DynamoDBDocumentClient,
  tableName: string,
  kind: AttentionKind,
  pageSize: number,
  /** Only items whose `attention_at` is at or before this (epoch ms); all when unset. */
  dueBy?: number,
  /** Only the partitions of this scope (see `attentionPk`). */
  scope?: string,
): AsyncGenerator<Item[]> {
  const { name, partitionKey, sortKey } = TableSchema.attentionIndex;
  for (const partition of attentionPartitions(kind, scope)) {
    const pages = paginateQuery(
      { client: doc },
      {
        Limit: pageSize,
        TableName: tableName,
        IndexName: name,
        KeyConditionExpression: dueBy === undefined ? '#pk = :pk' : '#pk = :pk AND #at <= :due',
        ExpressionAttributeNames: { '#pk': partitionKey, ...(dueBy === undefined ? {} : { '#at': sortKey }) },
        ExpressionAttributeValues: { ':pk': partition, ...(dueBy === undefined ? {} : { ':due': dueBy }) },
      },
    );
    for await (const page of pages) yield page.Items ?? [];
  }
}
