import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyEngine } from '../../lambdas/engine/engine';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(() => table.drop());

describe('engine smoke', () => {
  it('executes once and replays', async () => {
    const engine = new IdempotencyEngine({ store: new DynamoDbIdempotencyStore(table.doc, table.tableName) });
    let runs = 0;
    const call = () =>
      engine.run({ tenant: 'tenant-a', tool: 'demo', idempotencyKey: 'key-00000001', args: { a: 1 } }, {}, async () => {
        runs++;
        return { result: { n: runs } };
      });
    const first = await call();
    const second = await call();
    expect(first).toMatchObject({ outcome: 'succeeded', replayed: false, result: { n: 1 } });
    expect(second).toMatchObject({ outcome: 'succeeded', replayed: true, result: { n: 1 } });
    expect(runs).toBe(1);
  });
});
