import { afterAll, beforeAll } from 'vitest';
import { InMemoryIdempotencyStore } from 'idempotent-mcp/engine';
import { describeStoreConformance } from 'idempotent-mcp/engine/testing';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { AwsSdkTransport, awsClientConfig, DocumentClient, DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { createTestTable } from '../support/dynamodb';

describeStoreConformance('in memory', { store: () => new InMemoryIdempotencyStore() });

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());
// The same table through a DynamoDB client of the AWS SDK (a team's own, configured client).
let sdkClient: DocumentClient | undefined;
const throughAwsSdk = () =>
  (sdkClient ??= new DocumentClient(new AwsSdkTransport(new DynamoDBClient({ ...awsClientConfig(table.endpoint), maxAttempts: 3 }))));
afterAll(() => sdkClient?.destroy());

describeStoreConformance('DynamoDB', { store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName }), reviewStore: true });
describeStoreConformance('DynamoDB with a key prefix', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, keyPrefix: 'team-a:' }),
  reviewStore: true,
});
describeStoreConformance('DynamoDB without the attention index', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, attentionIndex: false }),
  reviewStore: true,
});
describeStoreConformance('DynamoDB through the AWS SDK client', {
  store: () => new DynamoDbIdempotencyStore({ client: throughAwsSdk(), tableName: table.tableName }),
  reviewStore: true,
});
