import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbClientDefaults, closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';
import { startDynamoDbFaultProxy, type DynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { ENGINE_PATHS, engineFor, newKey, orderWrite } from '../support/engine';

/**
 * A DynamoDB brownout: every request fails (HTTP 500 from the fault proxy, nothing applied). A call may spend one
 * path's attempts and no more, and the SDK's standard retry quota (one per client, so per Lambda container) stops
 * retries across calls once the outage has drained it. The requests per call are printed for the record.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
let proxy: DynamoDbFaultProxy;
beforeAll(async () => {
  table = await createTestTable();
  proxy = await startDynamoDbFaultProxy(table.endpoint);
});
afterAll(async () => {
  await proxy.stop();
  await table.drop();
});

const EVERY_OPERATION = ['PutItem', 'GetItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems'];

describe.each(ENGINE_PATHS)('with every DynamoDB request failing, on the $path path', ({ effect }) => {
  it("a call makes at most one path's attempts, and the retry quota then cuts every call to one request", async () => {
    // A fresh client: a fresh retry quota, as in a new container.
    const doc = createDynamoDbClient({ endpoint: proxy.endpoint });
    const engine = engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }) });
    proxy.clear();
    for (const operation of EVERY_OPERATION) proxy.inject({ operation, fault: 'fail', times: 1_000_000 });
    const perCall: number[] = [];
    try {
      for (let i = 0; i < 60; i++) {
        const key = newKey();
        const before = proxy.received().length;
        const answer = await engine.run(
          { tenant: 'tenant-brownout', tool: 'create_order', idempotencyKey: key, args: {} },
          {},
          async () => ({
            result: { order_id: key },
            writes: [orderWrite('tenant-brownout', key)],
          }),
        );
        expect(answer).toMatchObject({ outcome: 'unknown', retryable: true });
        perCall.push(proxy.received().length - before);
      }
    } finally {
      closeDynamoDbClient(doc);
      proxy.clear();
    }
    console.log(`${effect}: DynamoDB requests per call with every request failing, calls 1-60: ${perCall.join(' ')}`);
    expect(Math.max(...perCall)).toBe(DynamoDbClientDefaults.maxAttempts);
    // The standard quota is spent within a few dozen calls of the outage: from then on no call retries.
    expect(perCall.slice(-5)).toEqual([1, 1, 1, 1, 1]);
  }, 120_000);
});
