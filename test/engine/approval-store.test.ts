import { afterAll, beforeAll } from 'vitest';
import { InMemoryApprovalStore } from 'idempotent-mcp/engine';
import { describeApprovalStoreConformance } from 'idempotent-mcp/engine/testing';
import { DynamoDbApprovalStore } from 'idempotent-mcp/dynamodb';
import { createTestTable } from '../support/dynamodb';

/**
 * The approval stores a team's own server uses through the public subpaths (the in-memory one for tests, the
 * DynamoDB adapter) pass the suite a team's own store runs.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

describeApprovalStoreConformance('in memory', { store: () => new InMemoryApprovalStore() });
describeApprovalStoreConformance('DynamoDB', { store: () => new DynamoDbApprovalStore({ client: table.doc, tableName: table.tableName }) });
// Two gateways' upstreams on one table: neither reads, decides nor uses the other's approvals.
describeApprovalStoreConformance('DynamoDB, beside a store of another key prefix on the same table', {
  store: () => new DynamoDbApprovalStore({ client: table.doc, tableName: table.tableName, keyPrefix: 'gateway.mine:' }),
  neighbour: () => new DynamoDbApprovalStore({ client: table.doc, tableName: table.tableName, keyPrefix: 'gateway.other:' }),
});
