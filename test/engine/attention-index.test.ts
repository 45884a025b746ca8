import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { TableSchema } from '../../lambdas/store/table-schema';
import { AttentionIndexOffError } from '../../lambdas/store/attention-index';
import { OutboxStore } from '../../lambdas/outbox/outbox-store';
import { processingRecord } from '../../lambdas/engine/testing/store-conformance';
import { Reconciler } from '../../lambdas/reconciler/reconciler';
import type { IdempotencyRecord, OperatorDecision, ReviewEntry } from 'idempotent-mcp/engine';
import { Keys } from '../../lambdas/core/keys';
import { logger } from '../../lambdas/observability/logger';
import { ReviewDesk } from '../../lambdas/ops/review';
import { createTestTable } from '../support/dynamodb';

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

const T0 = Date.UTC(2030, 0, 1);
const unknownError = { code: 'OUTCOME_UNKNOWN', message: 'timed out' };

const processing = () => processingRecord();

/**
 * Walks records through every write that touches the index (claim, take-over, UNKNOWN, a deferred check, review,
 * an operator's recheck and settlement, an expired lease, a settlement) and notes, after each, whether the stored
 * item carries the index's attributes.
 */
async function indexAttributesAlongTheWay(store: DynamoDbIdempotencyStore): Promise<Array<[string, boolean]>> {
  const seen: Array<[string, boolean]> = [];
  const look = async (step: string, record: IdempotencyRecord) => {
    const { Item } = await table.doc.send(
      new GetCommand({
        TableName: table.tableName,
        Key: Keys.idempotency(record.tenant, record.tool, record.idempotencyKey),
        ConsistentRead: true,
      }),
    );
    const { partitionKey, sortKey } = TableSchema.attentionIndex;
    seen.push([step, Item?.[partitionKey] !== undefined || Item?.[sortKey] !== undefined]);
  };
  const decide = async (record: IdempotencyRecord, decision: OperatorDecision, now: number) => {
    const current = (await store.get(record))!;
    const entry: ReviewEntry = {
      by: 'test',
      at: now,
      action: decision.event,
      reason: 'checked by hand',
      from: current.status,
      to: 'UNKNOWN',
    };
    expect(await store.decide(current, await store.reviewLog(record), decision, entry, now)).toBe(true);
  };

  const first = processing();
  await store.claim(first, T0);
  await look('claimed', first);
  const owner = randomUUID();
  expect(await store.takeOver(first, first.ownerToken, owner, T0 + 120_000, T0 + 60_000)).toBe(true);
  await look('taken over', first);
  expect(
    await store.markUnknown(
      first,
      owner,
      { error: unknownError, errorType: 'uncertain', nextCheckAt: T0 + 70_000, inFlightUntil: T0 + 70_000 },
      T0 + 65_000,
    ),
  ).toBe(true);
  await look('unknown', first);
  expect(await store.deferReconcile((await store.get(first))!, T0 + 90_000, unknownError, T0 + 70_000)).toBe(true);
  await look('check deferred', first);
  expect(await store.reconcile((await store.get(first))!, { event: 'reconcile_exhausted', error: unknownError }, T0 + 90_000)).toBe(true);
  await look('needs review', first);
  await decide(first, { event: 'operator_recheck' }, T0 + 100_000);
  await look('rechecked', first);
  await decide(first, { event: 'operator_settled_found', result: { ok: true } }, T0 + 110_000);
  await look('settled by an operator', first);

  const second = processing();
  await store.claim(second, T0);
  expect(await store.expireLease(second, T0 + 60_000, T0 + 60_000)).toBe(true);
  await look('lease expired', second);
  expect(await store.reconcile((await store.get(second))!, { event: 'reconciled_found', result: 1 }, T0 + 70_000)).toBe(true);
  await look('reconciled', second);

  const third = processing();
  await store.claim(third, T0);
  await store.settle(third, third.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 1);
  await look('settled', third);
  return seen;
}

describe('the DynamoDB store with the attention index on or off', () => {
  const store = (attentionIndex?: boolean) =>
    new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, attentionIndex });

  it('on (the default): records carry the index key while they need a look, and lose it once settled', async () => {
    expect(await indexAttributesAlongTheWay(store())).toEqual([
      ['claimed', true],
      ['taken over', true],
      ['unknown', true],
      ['check deferred', true],
      ['needs review', true],
      ['rechecked', true],
      ['settled by an operator', false],
      ['lease expired', true],
      ['reconciled', false],
      ['settled', false],
    ]);
  });

  it('off: no write puts an index attribute on a record, in any state', async () => {
    const steps = await indexAttributesAlongTheWay(store(false));
    expect(steps).toHaveLength(10);
    expect(steps.filter(([, carries]) => carries)).toEqual([]);
  });

  it('the reconciler and `ops list` refuse a store with the index off, saying so', async () => {
    const off = store(false);
    const build = () => new Reconciler({ store: off, tools: new Map(), logger });
    expect(build).toThrow(AttentionIndexOffError);
    expect(build).toThrow(/The reconciler reads the attention index, but the idempotency store was created with attentionIndex: false/);
    const desk = new ReviewDesk({
      store: off,
      outbox: new OutboxStore(table.doc, table.tableName),
      tools: new Map(),
      who: async () => 'test',
      logger,
    });
    await expect(desk.list()).rejects.toThrow(
      /`ops list` reads the attention index, but the idempotency store was created with attentionIndex: false/,
    );
    // With the index on, both work.
    expect(() => new Reconciler({ store: store(), tools: new Map(), logger })).not.toThrow();
  });

  it('refuses an attentionIndex that is not a boolean', () => {
    expect(
      () => new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName, attentionIndex: 'off' as unknown as boolean }),
    ).toThrow(/attentionIndex must be true or false/);
  });
});
