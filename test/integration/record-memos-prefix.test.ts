import { afterAll, beforeAll, expect, it } from 'vitest';
import { DynamoDbRecordMemos } from '../../lambdas/store/dynamodb-record-memos';
import { createTestTable } from '../support/dynamodb';

/**
 * Two gateways (or endpoints) on one table, told apart by their key prefix, keep the memos of their records apart:
 * the same tenant, tool, key and memo name under `ep-a:` and unprefixed are two memos, each read back as its own.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

it("a memo is kept under its store's key prefix: two prefixes on one table read their own", async () => {
  const prefixed = new DynamoDbRecordMemos({ doc: table.doc, tableName: table.tableName, keyPrefix: 'ep-a:' });
  const plain = new DynamoDbRecordMemos({ doc: table.doc, tableName: table.tableName });
  const identity = { tenant: 'tenant-shared', tool: 'lookup', idempotencyKey: 'key-0001-memos' };
  const expiresAt = Math.floor(Date.now() / 1000) + 3600;

  await prefixed.put(identity, 'listing', { from: 'ep-a' }, expiresAt);
  expect(await plain.get(identity, 'listing')).toBeUndefined();

  await plain.put(identity, 'listing', { from: 'plain' }, expiresAt);
  expect(await prefixed.get(identity, 'listing')).toEqual({ from: 'ep-a' });
  expect(await plain.get(identity, 'listing')).toEqual({ from: 'plain' });
});
