import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { Reconciler } from '../../lambdas/reconciler/reconciler';
import type { IdempotencyRecord } from 'idempotent-mcp/engine';
import { processingRecord } from '../../lambdas/engine/testing/store-conformance';
import { createTestTable } from '../support/dynamodb';

/**
 * The reconciler never asks the downstream about an UNKNOWN record a follower marked (so never concludes `absent` and
 * frees the key) while the executor's lease plus the grace still runs: the executor may still be finishing (issue
 * 23's planted bug "the reconciler settling absent while the first call's lease still runs"). The grace is the one
 * the reconciler gives a stale PROCESSING record before it marks it itself.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

const T0 = Date.UTC(2030, 0, 1);
const LEASE = T0 + 10_000;
const GRACE = 5_000;
const unknownError = { code: 'OUTCOME_UNKNOWN', message: 'timed out' };

describe('the reconciler waits for the lease and its grace before it checks an UNKNOWN record', () => {
  const store = () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName });

  /** A reconciler on a clock the test moves; its hook answers `absent` and counts the questions per key. */
  function reconcilerAt(clock: { now: number }, asked: Map<string, number>) {
    return new Reconciler({
      store: store(),
      tools: new Map([
        [
          'orders.create',
          {
            onAbsent: 'release' as const,
            // No window: what is checked here is the lease's grace alone.
            inFlightWindowMs: 0,
            reconcile: async ({ record }: { record: IdempotencyRecord }) => {
              asked.set(record.idempotencyKey, (asked.get(record.idempotencyKey) ?? 0) + 1);
              return { kind: 'absent' as const };
            },
          },
        ],
      ]),
      logger: new Logger({ logLevel: 'SILENT' }),
      clock: () => clock.now,
      leaseGraceMs: GRACE,
    });
  }

  it('a follower marked it UNKNOWN the moment its lease passed: not asked before lease + grace, asked and released after', async () => {
    const record = processingRecord({ leaseExpiresAt: LEASE });
    expect(await store().claim(record, T0)).toMatchObject({ claimed: true });
    // What the engine does for a duplicate that finds the lease passed and re-running unsafe (`mark_unknown`).
    expect(await store().expireLease(record, LEASE, LEASE)).toBe(true);
    const clock = { now: LEASE };
    const asked = new Map<string, number>();
    const reconciler = reconcilerAt(clock, asked);
    for (const now of [LEASE, LEASE + GRACE - 1]) {
      clock.now = now;
      await reconciler.runOnce();
      expect(asked.get(record.idempotencyKey), `asked ${now - LEASE} ms after the lease`).toBeUndefined();
      expect(await store().get(record)).toMatchObject({ status: 'UNKNOWN' });
    }
    clock.now = LEASE + GRACE;
    expect(await reconciler.runOnce()).toMatchObject({ released: 1 });
    expect(asked.get(record.idempotencyKey)).toBe(1);
    expect(await store().get(record)).toBeUndefined();
  });

  it('the executor marked its own record UNKNOWN (it stopped): checked at once', async () => {
    const record = processingRecord({ leaseExpiresAt: LEASE });
    expect(await store().claim(record, T0)).toMatchObject({ claimed: true });
    const at = T0 + 2_000;
    expect(
      await store().markUnknown(
        record,
        record.ownerToken,
        { error: unknownError, errorType: 'uncertain', nextCheckAt: at, inFlightUntil: at },
        at,
      ),
    ).toBe(true);
    const asked = new Map<string, number>();
    expect(await reconcilerAt({ now: at }, asked).runOnce()).toMatchObject({ released: 1 });
    expect(asked.get(record.idempotencyKey)).toBe(1);
  });
});
