import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UncertainToolError } from '../../lambdas/core/errors';
import { IdempotencyEngine } from '../../lambdas/engine/engine';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';
import { manualClock, newKey, storedItem } from '../support/engine';

const HOUR = 3600_000;
const tenant = 'tenant-ttl';
const tool = 'ttl_tool';

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(() => table.drop());

/**
 * TTL deletes an item some time after `expires_at` (DynamoDB Local never does, so the attribute itself is asserted).
 * An UNKNOWN record deleted by TTL would free a key whose effect may exist: it must carry no TTL until settled,
 * and once settled it replays for a full retention from the settlement.
 */
describe('an UNKNOWN record and TTL', () => {
  it('holds no TTL while unsettled, and a late settlement replays for a full retention', async () => {
    const time = manualClock(Date.UTC(2026, 0, 1));
    const store = new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName });
    const engine = new IdempotencyEngine({ store, clock: time.clock });
    const key = newKey();
    let runs = 0;
    const call = () =>
      engine.run({ tenant, tool, idempotencyKey: key, args: { amount: 5 } }, { retentionSeconds: 24 * 3600 }, async () => {
        runs++;
        throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'no answer from the downstream');
      });

    expect((await call()).outcome).toBe('unknown');
    const unknownItem = await storedItem(table.doc, table.tableName, tenant, tool, key);
    expect(unknownItem?.status).toBe('UNKNOWN');
    expect(unknownItem?.expires_at).toBeUndefined();

    // Two days later (past the original retention) the reconciler finds the effect downstream.
    time.advance(48 * HOUR);
    const record = await store.get({ tenant, tool, idempotencyKey: key });
    expect(record?.status).toBe('UNKNOWN');
    expect(await store.reconcile(record!, { event: 'reconciled_found', result: { ok: true } }, time.clock())).toBe(true);
    const settled = await storedItem(table.doc, table.tableName, tenant, tool, key);
    expect(settled?.status).toBe('SUCCEEDED');
    expect(settled?.expires_at).toBe(Math.floor((time.clock() + 24 * HOUR) / 1000));

    // An hour after the settlement the duplicate replays the downstream's result; nothing runs again.
    time.advance(HOUR);
    const replay = await call();
    expect(replay).toMatchObject({ outcome: 'succeeded', replayed: true, result: { ok: true } });
    expect(runs).toBe(1);
  });
});
