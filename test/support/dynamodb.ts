import { randomUUID } from 'node:crypto';
import { DeleteTableCommand } from '@aws-sdk/client-dynamodb';
import { inject } from 'vitest';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { ensureTable } from '../../lambdas/store/table-schema';

/** A fresh table on the shared DynamoDB Local, so test files never see each other's records. */
export async function createTestTable() {
  const endpoint = inject('dynamodbEndpoint');
  const doc = createDynamoDbClient({ endpoint });
  const tableName = `test-${randomUUID()}`;
  await ensureTable(doc, tableName);
  return {
    endpoint,
    doc,
    tableName,
    drop: async () => {
      await doc.send(new DeleteTableCommand({ TableName: tableName })).catch(() => {});
      closeDynamoDbClient(doc);
    },
  };
}
