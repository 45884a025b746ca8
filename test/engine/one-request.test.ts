import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutionPath } from '../../lambdas/engine/write-request';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { Keys } from '../../lambdas/store/table-schema';
import { createTestTable } from '../support/dynamodb';
import { countDynamoDbRequests } from '../support/dynamodb-request-counter';
import { effectLedger, engineFor, manualClock, newKey, orderItem, orderKey, orderWrite, storedItem } from '../support/engine';

const TOOL = 'create_order';
const TENANT = 'tenant-once';

let table: Awaited<ReturnType<typeof createTestTable>>;
let doc: ReturnType<typeof createDynamoDbClient>;
let requests: ReturnType<typeof countDynamoDbRequests>;
beforeAll(async () => {
  table = await createTestTable();
  doc = createDynamoDbClient({ endpoint: table.endpoint });
  requests = countDynamoDbRequests(doc);
});
afterAll(async () => {
  closeDynamoDbClient(doc);
  await table.drop();
});

const localEngine = (
  options: Parameters<typeof engineFor>[1] = { store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }) },
) => engineFor('local', options);

/**
 * A local tool: its whole effect is one order item, committed with the record. It runs for every call, duplicates
 * included; how often it acted is counted in the table (`effects`: one item per run that committed), never from the
 * engine's answers or events.
 */
function orderTool(key: string) {
  const paths: ExecutionPath[] = [];
  const orderId = `order-${key}`;
  const effects = effectLedger('local', table);
  return {
    paths,
    orderId,
    effects,
    executor: async (ctx: { path: ExecutionPath }) => {
      paths.push(ctx.path);
      const run = paths.length;
      return { result: { order_id: orderId, run }, writes: [orderWrite(TENANT, orderId, { run }), ...effects.act().writes!] };
    },
  };
}

describe('the one-request path (a tool whose effect is local)', () => {
  it('a first call is one TransactWriteItems; on another container a replay and a conflict are one failed TransactWriteItems each', async () => {
    const e = localEngine();
    const otherContainer = localEngine();
    const key = newKey();
    const tool = orderTool(key);
    const call = (amount: number, engine = e) =>
      engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount } }, {}, tool.executor);

    requests.reset();
    expect(await call(1)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { order_id: tool.orderId } });
    expect(requests.byOperation).toEqual({ TransactWriteItems: 1 });
    expect(await orderItem(table.doc, table.tableName, TENANT, tool.orderId)).toMatchObject({ order_id: tool.orderId });
    expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({ status: 'SUCCEEDED', result: { run: 1 } });

    requests.reset();
    expect(await call(1, otherContainer)).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
      result: { order_id: tool.orderId, run: 1 },
    });
    expect(requests.byOperation).toEqual({ TransactWriteItems: 1 });

    requests.reset();
    expect(await call(2, localEngine())).toMatchObject({ outcome: 'conflict', error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    expect(requests.byOperation).toEqual({ TransactWriteItems: 1 });
    expect(tool.paths.every((p) => p === 'one_request')).toBe(true);
    expect(await tool.effects.count()).toBe(1);
    expect(await orderItem(table.doc, table.tableName, TENANT, tool.orderId)).toMatchObject({ run: 1 });
  });

  it('on the container that answered the key, a replay and a conflict are one strongly consistent GetItem each: the tool does not run', async () => {
    const e = localEngine();
    const key = newKey();
    const tool = orderTool(key);
    const call = (amount: number) => e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount } }, {}, tool.executor);
    await call(1);

    requests.reset();
    expect(await call(1)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { order_id: tool.orderId, run: 1 } });
    expect(requests.byOperation).toEqual({ GetItem: 1 });

    requests.reset();
    expect(await call(2)).toMatchObject({ outcome: 'conflict', error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    expect(requests.byOperation).toEqual({ GetItem: 1 });
    expect(tool.paths).toEqual(['one_request']);
    expect(await tool.effects.count()).toBe(1);
  });

  it("on another container, a client's replay hint makes a replay and a conflict one GetItem each, no transaction: the tool does not run", async () => {
    const key = newKey();
    const tool = orderTool(key);
    const call = (amount: number, likelyReplay?: boolean) =>
      localEngine().run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount }, likelyReplay }, {}, tool.executor);
    await call(1);

    requests.reset();
    expect(await call(1, true)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { order_id: tool.orderId, run: 1 } });
    expect(requests.byOperation).toEqual({ GetItem: 1 });

    requests.reset();
    expect(await call(2, true)).toMatchObject({ outcome: 'conflict', error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    expect(requests.byOperation).toEqual({ GetItem: 1 });
    expect(tool.paths).toEqual(['one_request']);
    expect(await tool.effects.count()).toBe(1);
  });

  it('a replay hint on a first call costs one GetItem more: the key is free, the call commits once in one request', async () => {
    const key = newKey();
    const tool = orderTool(key);
    requests.reset();
    expect(
      await localEngine().run(
        { tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 }, likelyReplay: true },
        {},
        tool.executor,
      ),
    ).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
    });
    expect(requests.byOperation).toEqual({ GetItem: 1, TransactWriteItems: 1 });
    expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({ status: 'SUCCEEDED', result: { run: 1 } });
    expect(tool.paths).toEqual(['one_request']);
    expect(await tool.effects.count()).toBe(1);
  });

  it('a key the container answered and a reconciler or TTL deleted since commits again in one request after the read', async () => {
    const e = localEngine();
    const key = newKey();
    let run = 0;
    const call = () =>
      e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, {}, async () => ({ result: { run: ++run } }));
    await call();
    await table.doc.send(new DeleteCommand({ TableName: table.tableName, Key: Keys.idempotency(TENANT, TOOL, key) }));
    requests.reset();
    expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 2 } });
    expect(requests.byOperation).toEqual({ GetItem: 1, TransactWriteItems: 1 });
    expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({ status: 'SUCCEEDED', result: { run: 2 } });
  });

  it('concurrent first calls: one commits, every other call replays its result, answered from the failed request', async () => {
    const e = localEngine();
    const key = newKey();
    const tool = orderTool(key);
    requests.reset();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, {}, tool.executor)),
    );
    const fresh = answers.filter((a) => a.outcome === 'succeeded' && !a.replayed);
    expect(fresh).toHaveLength(1);
    for (const a of answers) expect(a).toMatchObject({ outcome: 'succeeded', result: fresh[0]!.result });
    expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({
      status: 'SUCCEEDED',
      result: fresh[0]!.result,
    });
    // No read, no claim: each duplicate learnt the winner's record from its own cancelled transaction (a
    // transaction that met the winner's in flight tried again).
    expect(Object.keys(requests.byOperation)).toEqual(['TransactWriteItems']);
    expect(tool.paths.every((p) => p === 'one_request')).toBe(true);
    // Twenty runs, one effect: the table holds one committed run, the one every answer names.
    expect(await tool.effects.count()).toBe(1);
    expect(await orderItem(table.doc, table.tableName, TENANT, tool.orderId)).toMatchObject({
      run: (fresh[0]!.result as { run: number }).run,
    });
  });

  it('concurrent calls with other arguments: one commits, the others answer conflict', async () => {
    const e = localEngine();
    const key = newKey();
    const tool = orderTool(key);
    requests.reset();
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: i } }, {}, tool.executor),
      ),
    );
    expect(answers.filter((a) => a.outcome === 'succeeded' && !a.replayed)).toHaveLength(1);
    expect(answers.filter((a) => a.outcome === 'conflict')).toHaveLength(9);
    expect(Object.keys(requests.byOperation)).toEqual(['TransactWriteItems']);
    expect(await tool.effects.count()).toBe(1);
  });

  it('a conflict on another container costs the one failed request, with no read', async () => {
    const e = localEngine();
    const key = newKey();
    const tool = orderTool(key);
    await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, {}, tool.executor);
    requests.reset();
    expect(
      await localEngine().run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 2 } }, {}, tool.executor),
    ).toMatchObject({
      outcome: 'conflict',
    });
    expect(requests.total()).toBe(1);
    expect(await tool.effects.count()).toBe(1);
  });

  it('a write refused by its own condition takes the claimed path: the tool runs again there and its answer settles', async () => {
    const e = localEngine();
    const key = newKey();
    const orderId = `order-${key}`;
    // An order left by an earlier use of the key whose record expired: the one-request put is refused.
    await table.doc.send(
      new PutCommand({ TableName: table.tableName, Item: { ...orderKey(TENANT, orderId), order_id: orderId, left: 'before' } }),
    );
    const paths: ExecutionPath[] = [];
    const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async (ctx) => {
      paths.push(ctx.path);
      // As create_order does: on the claimed path it reads the order and answers with it.
      if (ctx.path === 'claimed') return { result: { order_id: orderId, existing: true } };
      return { result: { order_id: orderId, existing: false }, writes: [orderWrite(TENANT, orderId)] };
    });
    expect(paths).toEqual(['one_request', 'claimed']);
    expect(answer).toMatchObject({ outcome: 'succeeded', replayed: false, result: { order_id: orderId, existing: true } });
    expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toMatchObject({ left: 'before' });
  });

  it('past retention the key is free on this path too: the next call commits again in one request', async () => {
    const clock = manualClock();
    const engine = () =>
      localEngine({ store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }), clock: clock.clock });
    const [e, otherContainer] = [engine(), engine()];
    const key = newKey();
    let run = 0;
    const call = (amount: number, on = e) =>
      on.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount } }, { retentionSeconds: 60 }, async () => ({
        result: { run: ++run },
      }));
    await call(1);
    clock.advance(60_000);
    requests.reset();
    expect(await call(2, otherContainer)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 2 } });
    expect(requests.byOperation).toEqual({ TransactWriteItems: 1 });
    // The container that answered the key reads its record first (a likely retry), finds it past retention, commits.
    clock.advance(60_000);
    requests.reset();
    expect(await call(3)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 3 } });
    expect(requests.byOperation).toEqual({ GetItem: 1, TransactWriteItems: 1 });
  });
});
