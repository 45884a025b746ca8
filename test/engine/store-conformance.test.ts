import { afterAll, beforeAll } from 'vitest';
import { InMemoryIdempotencyStore } from 'idempotent-mcp/engine';
import { describeStoreConformance } from 'idempotent-mcp/engine/testing';
import { DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { createTestTable } from '../support/dynamodb';

describeStoreConformance('in memory', { store: () => new InMemoryIdempotencyStore() });

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

describeStoreConformance('DynamoDB', { store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName }), reviewStore: true });
describeStoreConformance('DynamoDB with a key prefix', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, keyPrefix: 'team-a:' }),
  reviewStore: true,
});
describeStoreConformance('DynamoDB without the attention index', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, attentionIndex: false }),
  reviewStore: true,
});
