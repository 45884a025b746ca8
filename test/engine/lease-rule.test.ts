import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { InMemoryIdempotencyStore, type IdempotencyStore } from 'idempotent-mcp/engine';
import { leaseHasPassed } from '../../lambdas/core/lease';
import { processingRecord } from '../../lambdas/engine/testing/store-conformance';
import { OutboxStore } from '../../lambdas/outbox/outbox-store';
import { createTestTable } from '../support/dynamodb';

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

const T0 = Date.UTC(2030, 0, 1);
const LEASE = T0 + 60_000;
/** Just before the lease ends, the instant it ends, just after. */
const AROUND_THE_END = [LEASE - 1, LEASE, LEASE + 1];

const processing = () => processingRecord();

describe("one lease rule (core/lease.ts) for the engine's records and the outbox consumer's delivery claims", () => {
  const stores: Array<[string, () => IdempotencyStore]> = [
    ['in memory', () => new InMemoryIdempotencyStore()],
    ['DynamoDB', () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName })],
  ];

  it.each(stores)('%s: a stale record is taken over, or marked UNKNOWN, exactly when the lease has passed', async (_, open) => {
    const store = open();
    for (const now of AROUND_THE_END) {
      const takeOver = processing();
      await store.claim(takeOver, T0);
      const expire = processing();
      await store.claim(expire, T0);
      expect({
        now,
        takenOver: await store.takeOver(takeOver, takeOver.ownerToken, randomUUID(), now + 60_000, now),
        expired: await store.expireLease(expire, now, now),
      }).toEqual({
        now,
        takenOver: leaseHasPassed(LEASE, now),
        expired: leaseHasPassed(LEASE, now),
      });
    }
  });

  it("the outbox consumer's claim of a delivery held by another owner succeeds exactly when that lease has passed", async () => {
    const outbox = new OutboxStore(table.doc, table.tableName);
    for (const now of AROUND_THE_END) {
      const eventId = randomUUID();
      const first = await outbox.claimDelivery(eventId, 'first-owner', LEASE, T0);
      expect(first).toEqual({ claimed: true });
      const second = await outbox.claimDelivery(eventId, 'second-owner', now + 60_000, now);
      expect({ now, claimed: second.claimed }).toEqual({ now, claimed: leaseHasPassed(LEASE, now) });
      if (second.claimed) expect(second.previous).toMatchObject({ state: 'CLAIMED', owner: 'first-owner', leaseUntil: LEASE });
      else expect(second.existing).toMatchObject({ state: 'CLAIMED', owner: 'first-owner', leaseUntil: LEASE });
    }
  });
});
