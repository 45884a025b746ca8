import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { createDocumentClient } from '../../lambdas/store/clients';
import { ensureTable } from '../../lambdas/store/table-schema';

/** A fresh table on the shared DynamoDB Local, so test files never see each other's records. */
export async function createTestTable() {
  const endpoint = inject('dynamodbEndpoint');
  const doc = createDocumentClient(endpoint);
  const tableName = `test-${randomUUID()}`;
  await ensureTable(doc, tableName);
  return {
    endpoint,
    doc,
    tableName,
    drop: async () => {
      await doc.call('DeleteTable', { TableName: tableName }).catch(() => {});
      doc.destroy();
    },
  };
}
