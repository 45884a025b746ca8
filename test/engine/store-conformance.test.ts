import { afterAll, beforeAll } from 'vitest';
import { InMemoryIdempotencyStore } from 'idempotent-mcp/engine';
import { describeStoreConformance } from 'idempotent-mcp/engine/testing';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { awsClientConfig } from '../../lambdas/store/clients';
import { createTestTable } from '../support/dynamodb';

describeStoreConformance('in memory', { store: () => new InMemoryIdempotencyStore(), reviewStore: true, queries: true });

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());
// The same table through a team's own DynamoDB client of the AWS SDK (as Powertools' awsSdkV3Client).
let sdkClient: DynamoDBClient | undefined;
const teamClient = () => (sdkClient ??= new DynamoDBClient({ ...awsClientConfig(table.endpoint), maxAttempts: 2 }));
afterAll(() => sdkClient?.destroy());

describeStoreConformance('DynamoDB', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName }),
  reviewStore: true,
  queries: true,
});
describeStoreConformance('DynamoDB with a key prefix', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, keyPrefix: 'team-a:' }),
  reviewStore: true,
  queries: true,
});
describeStoreConformance('DynamoDB without the attention index', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, attentionIndex: false }),
  reviewStore: true,
});
describeStoreConformance("DynamoDB through a team's own AWS SDK client (awsSdkV3Client)", {
  store: () => new DynamoDbIdempotencyStore({ awsSdkV3Client: teamClient(), tableName: table.tableName }),
  reviewStore: true,
  queries: true,
});
describeStoreConformance('DynamoDB through a client made from clientConfig', {
  store: () => new DynamoDbIdempotencyStore({ clientConfig: awsClientConfig(table.endpoint), tableName: table.tableName }),
  reviewStore: true,
  queries: true,
});

// Two owners of one table (two gateways' upstreams, an endpoint and a gateway): neither reads, counts nor settles the other's records.
let sharedMemory: InMemoryIdempotencyStore | undefined;
describeStoreConformance('in memory, beside another store on the same records', {
  store: () => (sharedMemory = new InMemoryIdempotencyStore()),
  neighbour: () => new InMemoryIdempotencyStore({ keyPrefix: 'gateway.other:', sharedWith: sharedMemory }),
  reviewStore: true,
  queries: true,
});
describeStoreConformance('DynamoDB, beside a store of another key prefix on the same table', {
  store: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, keyPrefix: 'gateway.mine:' }),
  neighbour: () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName }),
  reviewStore: true,
  queries: true,
});
