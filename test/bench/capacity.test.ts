import { randomUUID } from 'node:crypto';
import { DeleteTableCommand, GetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createCapacityTables, measureCapacity, type CapacityTables } from './capacity';
import { meterCapacity, type CapacityMeter } from './capacity-meter';
import { IdempotencyEngine } from '../../lambdas/engine/engine';
import { closeDynamoDbClient, createDynamoDbBaseClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { Keys } from '../../lambdas/store/table-schema';
import { orderKey } from '../../reference/tools/orders';

/**
 * The `capacity` section of `npm run bench`, run small against DynamoDB Local: the figures a user reads are what
 * DynamoDB reports where it reports them, and DynamoDB's rules applied to the real items where it does not.
 */
let client: DynamoDBClient;
let sizing: DynamoDBClient;
let meter: CapacityMeter;
let tables: CapacityTables;
beforeAll(async () => {
  const endpoint = inject('dynamodbEndpoint');
  client = createDynamoDbBaseClient({ endpoint });
  sizing = createDynamoDbBaseClient({ endpoint });
  meter = meterCapacity(client, sizing);
  tables = await createCapacityTables(createDynamoDbClient({ awsSdkV3Client: sizing }));
});
afterAll(async () => {
  await meter.close();
  for (const name of Object.values(tables)) await sizing.send(new DeleteTableCommand({ TableName: name })).catch(() => {});
  closeDynamoDbClient(client);
  closeDynamoDbClient(sizing);
});

describe('the capacity bench harness', () => {
  it("measures every phase, and a replay of ours costs no more than Powertools' replay of the same tool", async () => {
    const { capacity, unexpected_outcomes } = await measureCapacity(client, meter, tables, 3);
    expect(unexpected_outcomes).toBe(0);
    for (const [variant, phases] of Object.entries(capacity)) {
      for (const [phase, f] of Object.entries(phases)) {
        expect({ variant, phase, consumed: f.wcu + f.rcu > 0, requests: f.requests >= 1 }).toEqual({
          variant,
          phase,
          consumed: true,
          requests: true,
        });
        expect(f.cost_per_million_usd).toBeGreaterThan(0);
      }
    }
    // Powertools' replay is a refused conditional PutItem: DynamoDB's answer carries no capacity, so it is computed.
    expect(capacity.powertools_local.replay).toMatchObject({ basis: 'computed', requests: 1 });
    expect(capacity.powertools_local.replay!.wcu).toBeGreaterThanOrEqual(1);
    // Ours, on the container that answered the key: one strongly consistent read, measured.
    expect(capacity.engine_local.replay).toMatchObject({ basis: 'measured', requests: 1, wcu: 0 });
    expect(capacity.engine_local.replay!.rcu).toBeGreaterThan(0);
    expect(capacity.engine_local.replay!.cost_per_million_usd).toBeLessThanOrEqual(capacity.powertools_local.replay!.cost_per_million_usd);
    expect(capacity.engine_local.conflict!.cost_per_million_usd).toBeLessThanOrEqual(
      capacity.powertools_local.conflict!.cost_per_million_usd,
    );
    expect(capacity.engine_claimed.replay!.cost_per_million_usd).toBeLessThanOrEqual(
      capacity.powertools_external.replay!.cost_per_million_usd,
    );
    // On another container the refused transaction is computed over every item it carries (record and order), each
    // a transactional write (prepare and commit).
    expect(capacity.engine_local.replay_other_container).toMatchObject({ basis: 'computed', requests: 1 });
    expect(capacity.engine_local.replay_other_container!.wcu).toBeGreaterThanOrEqual(4);
    // Our client's retry there carries the replay hint: one strongly consistent read, measured, no dearer than Powertools'.
    for (const phase of ['replay_other_container_hinted', 'conflict_other_container_hinted'] as const) {
      expect(capacity.engine_local[phase]).toMatchObject({ basis: 'measured', requests: 1, wcu: 0 });
      expect(capacity.engine_local[phase]!.rcu).toBeGreaterThan(0);
    }
    expect(capacity.engine_local.replay_other_container_hinted!.cost_per_million_usd).toBeLessThanOrEqual(
      capacity.powertools_local.replay!.cost_per_million_usd,
    );
  }, 120_000);

  it("counts every item a local tool's first call writes: the record and the order, twice each (a transaction)", async () => {
    const doc = createDynamoDbClient({ awsSdkV3Client: client });
    const engine = new IdempotencyEngine({ store: new DynamoDbIdempotencyStore({ client: doc, tableName: tables.engine }) });
    const key = `key-${randomUUID()}`;
    const orderId = `order-${randomUUID()}`;
    meter.take();
    const answer = await engine.run(
      { tenant: 'tenant-c', tool: 'create_order', idempotencyKey: key, args: { n: 1 }, effect: 'local' },
      {},
      async () => ({
        result: { order_id: orderId, lines: 'x'.repeat(1500) },
        writes: [{ create: { key: orderKey('tenant-c', orderId), item: { order_id: orderId, lines: 'y'.repeat(1200) } } }],
      }),
    );
    expect(answer).toMatchObject({ outcome: 'succeeded', replayed: false });
    const consumed = meter.take();
    const stored = async (key: { pk: string; sk: string }) =>
      (
        await sizing.send(
          new GetItemCommand({ TableName: tables.engine, Key: { pk: { S: key.pk }, sk: { S: key.sk } }, ConsistentRead: true }),
        )
      ).Item!;
    const items = [await stored(Keys.idempotency('tenant-c', 'create_order', key)), await stored(orderKey('tenant-c', orderId))];
    const sizes = await Promise.all(items.map((item) => meter.itemWcu(tables.engine, item)));
    expect(sizes.every((wcu) => wcu >= 2)).toBe(true); // both items over 1 KB: the rounding is per item
    expect(consumed).toMatchObject({ requests: 1, computedWcu: 0, measuredWcu: 2 * (sizes[0]! + sizes[1]!) });
  });

  it('computes a refused write by the larger of the stored and the new item, and a cancelled transaction over each action', async () => {
    const doc = createDynamoDbClient({ awsSdkV3Client: client });
    const key = { pk: `P#${randomUUID()}`, sk: 'S' };
    meter.take();
    await doc.send(new PutCommand({ TableName: tables.engine, Item: { ...key, big: 'z'.repeat(2500) } }));
    const measuredPut = meter.take().measuredWcu;
    expect(measuredPut).toBeGreaterThanOrEqual(3);

    const refused = doc.send(
      new PutCommand({ TableName: tables.engine, Item: { ...key, small: 1 }, ConditionExpression: 'attribute_not_exists(pk)' }),
    );
    await expect(refused).rejects.toMatchObject({ name: 'ConditionalCheckFailedException' });
    expect(meter.take()).toMatchObject({ requests: 1, measuredWcu: 0, computedWcu: measuredPut });

    const other = { pk: `P#${randomUUID()}`, sk: 'S' };
    const cancelled = doc.send(
      new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: tables.engine, Item: { ...other, small: 1 }, ConditionExpression: 'attribute_not_exists(pk)' } },
          { Put: { TableName: tables.engine, Item: { ...key, small: 2 }, ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
      }),
    );
    await expect(cancelled).rejects.toMatchObject({ name: 'TransactionCanceledException' });
    // A transactional write of each action, prepare and commit: the free item's put (1) and the refused one, by the
    // stored item (read back, as the refusal did not carry it), twice each.
    expect(meter.take()).toMatchObject({ requests: 1, measuredWcu: 0, computedWcu: 2 * (1 + measuredPut) });
  });
});
