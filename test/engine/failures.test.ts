import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TerminalToolError, TransientToolError, UncertainToolError } from '../../lambdas/core/errors';
import type { EngineOptions } from '../../lambdas/engine/engine';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';
import { startDynamoDbFaultProxy, type DynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { effectLedger, manualClock, newKey, orderItem, orderKey, orderWrite, storedItem, ENGINE_PATHS, engineFor } from '../support/engine';

const TOOL = 'create_order';
const TENANT = 'tenant-faults';

let table: Awaited<ReturnType<typeof createTestTable>>;
let proxy: DynamoDbFaultProxy;
/** The engine's client goes through the proxy; the test reads DynamoDB Local directly. */
let proxiedDoc: ReturnType<typeof createDynamoDbClient>;
beforeAll(async () => {
  table = await createTestTable();
  proxy = await startDynamoDbFaultProxy(table.endpoint);
  proxiedDoc = createDynamoDbClient({ endpoint: proxy.endpoint });
});
afterEach(() => proxy.clear());
afterAll(async () => {
  closeDynamoDbClient(proxiedDoc);
  await proxy.stop();
  await table.drop();
});

describe.each(ENGINE_PATHS)('$path path', ({ effect }) => {
  function engine(options: Partial<EngineOptions> = {}) {
    return engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: proxiedDoc, tableName: table.tableName }), ...options });
  }
  const stored = (key: string) => storedItem(table.doc, table.tableName, TENANT, TOOL, key);

  describe('failures the tool classifies', () => {
    it('terminal: stored as FAILED and replayed with the stored error; nothing runs again', async () => {
      const e = engine();
      const key = newKey();
      const effects = effectLedger(effect, table);
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 5 } }, {}, async () => {
          effects.act();
          throw new TerminalToolError('CARD_DECLINED', 'the card was declined');
        });
      const first = await call();
      const replay = await call();
      expect(first).toMatchObject({
        outcome: 'failed',
        replayed: false,
        retryable: false,
        error: { code: 'CARD_DECLINED', message: 'the card was declined' },
      });
      expect(replay).toMatchObject({
        outcome: 'failed',
        replayed: true,
        retryable: false,
        error: { code: 'CARD_DECLINED', message: 'the card was declined' },
      });
      expect(replay.first_executed_at).toBeDefined();
      // The declined call reached the downstream once; a local tool's failure committed no item, only its record.
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 1);
      expect(await stored(key)).toMatchObject({ status: 'FAILED' });
    });

    it('transient: the key is released, so a retry with the same key executes', async () => {
      const e = engine();
      const key = newKey();
      let runs = 0;
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 5 } }, {}, async () => {
          if (++runs === 1) throw new TransientToolError('DOWNSTREAM_BUSY', 'try again shortly', 750);
          return { result: { ok: runs } };
        });
      expect(await call()).toMatchObject({ outcome: 'failed', retryable: true, retry_after_ms: 750, error: { code: 'DOWNSTREAM_BUSY' } });
      expect(await stored(key)).toBeUndefined();
      expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: false, result: { ok: 2 } });
      expect(runs).toBe(2);
    });

    it.each([
      ['an uncertain failure', () => new UncertainToolError('TIMEOUT', 'no answer after sending')],
      ['an unclassified error', () => new Error('ECONNRESET')],
    ])('%s becomes UNKNOWN, never FAILED or released, and a retry does not execute', async (_, failure) => {
      const e = engine();
      const key = newKey();
      const effects = effectLedger(effect, table);
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
          effects.act();
          throw failure();
        });
      expect(await call()).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'OUTCOME_UNKNOWN' } });
      expect(await call()).toMatchObject({ outcome: 'unknown' });
      // A local tool acts only by committing: its uncertain failure committed nothing.
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 1);
      expect(await stored(key)).toMatchObject({ status: 'UNKNOWN', error_type: 'uncertain' });
    });
  });

  describe("the tool's own writes", () => {
    it('commit atomically with SUCCEEDED', async () => {
      const e = engine();
      const key = newKey();
      const orderId = `order-${key}`;
      const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({
        result: { order_id: orderId },
        writes: [orderWrite(TENANT, orderId, { total: 12 })],
      }));
      expect(answer).toMatchObject({ outcome: 'succeeded', result: { order_id: orderId } });
      expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toMatchObject({ order_id: orderId, total: 12 });
      expect(await stored(key)).toMatchObject({ status: 'SUCCEEDED' });
    });

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'a cancelled transaction leaves neither the business item nor a SUCCEEDED record, and releases the key',
      async () => {
        const e = engine();
        const key = newKey();
        const takenId = `taken-${key}`;
        const newId = `new-${key}`;
        // The order id is already used: the write's ConditionExpression fails, cancelling the whole transaction.
        await table.doc.send(
          new PutCommand({ TableName: table.tableName, Item: { ...orderKey(TENANT, takenId), order_id: takenId, owner: 'someone else' } }),
        );
        let runs = 0;
        const call = () =>
          e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
            runs++;
            return {
              result: { order_id: runs === 1 ? takenId : newId },
              writes: [
                { create: { key: orderKey(TENANT, `side-${key}`), item: { order_id: `side-${key}` } } },
                orderWrite(TENANT, runs === 1 ? takenId : newId),
              ],
            };
          });
        expect(await call()).toMatchObject({ outcome: 'failed', retryable: true, error: { code: 'TRANSIENT_FAILURE' } });
        expect(await stored(key)).toBeUndefined();
        expect(await orderItem(table.doc, table.tableName, TENANT, takenId)).toMatchObject({ owner: 'someone else' });
        expect(await orderItem(table.doc, table.tableName, TENANT, `side-${key}`)).toBeUndefined();

        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: false, result: { order_id: newId } });
        expect(runs).toBe(2);
      },
    );

    it('a result over maxResultBytes is refused with RESULT_TOO_LARGE: its writes do not commit, the outcome is left to verify', async () => {
      const e = engine();
      const key = newKey();
      const orderId = `big-${key}`;
      const effects = effectLedger(effect, table);
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, { maxResultBytes: 1024 }, async () => {
          const { writes = [] } = effects.act();
          return { result: { blob: 'x'.repeat(2000) }, writes: [...writes, orderWrite(TENANT, orderId)] };
        });
      const answer = await call();
      expect(answer).toMatchObject({ outcome: 'unknown', error: { code: 'RESULT_TOO_LARGE' } });
      expect(answer.error!.message).toMatch(/over the 1024-byte limit/);
      expect(answer.result).toBeUndefined();
      expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toBeUndefined();
      expect(await stored(key)).toMatchObject({ status: 'UNKNOWN', error_type: 'result_too_large' });
      expect(await call()).toMatchObject({ outcome: 'unknown' });
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 1);
    });

    it('the first answer is the stored JSON, identical to every replay', async () => {
      const e = engine();
      const key = newKey();
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({
          result: { at: new Date(Date.UTC(2030, 0, 1)), skipped: undefined, n: 1.5 },
        }));
      const first = await call();
      const replay = await call();
      expect(first.result).toEqual({ at: '2030-01-01T00:00:00.000Z', n: 1.5 });
      expect(replay.result).toEqual(first.result);
    });
  });

  describe('store failures (through a fault-injecting proxy in front of DynamoDB Local)', () => {
    it.skipIf(effect === 'local')('a completion that fails leaves UNKNOWN, and a retry does not execute', async () => {
      const e = engine();
      const key = newKey();
      const orderId = `order-${key}`;
      let runs = 0;
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
          runs++;
          return { result: { order_id: orderId }, writes: [orderWrite(TENANT, orderId)] };
        });
      proxy.inject({ operation: 'TransactWriteItems', fault: 'fail', times: 100 });
      expect(await call()).toMatchObject({ outcome: 'unknown', retryable: true });
      expect(proxy.faulted()[0]).toBeGreaterThanOrEqual(1);
      expect(await stored(key)).toMatchObject({ status: 'UNKNOWN', error_type: 'store_error' });
      expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toBeUndefined();
      proxy.clear();
      expect(await call()).toMatchObject({ outcome: 'unknown' });
      expect(runs).toBe(1);
    });

    it.skipIf(effect !== 'local')(
      'a one-request commit the store never answers is unknown, with no second path tried; a later call commits once',
      async () => {
        const e = engine();
        const key = newKey();
        const orderId = `order-${key}`;
        const call = () =>
          e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({
            result: { order_id: orderId },
            writes: [orderWrite(TENANT, orderId)],
          }));
        proxy.inject({ operation: 'TransactWriteItems', fault: 'fail', times: 100 });
        expect(await call()).toMatchObject({ outcome: 'unknown', retryable: true });
        // The SDK's attempts of the one transaction, and no claim after them.
        expect(proxy.received().map((r) => r.operation)).toEqual(['TransactWriteItems', 'TransactWriteItems', 'TransactWriteItems']);
        expect(await stored(key)).toBeUndefined();
        expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toBeUndefined();
        proxy.clear();
        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: false, result: { order_id: orderId } });
        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: true, result: { order_id: orderId } });
        expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toBeDefined();
      },
    );

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'when the store stays down through completion, the record stays PROCESSING and then turns UNKNOWN; nothing runs again',
      async () => {
        const clock = manualClock();
        const e = engine({ clock: clock.clock, inProgressWaitMs: 50 });
        const key = newKey();
        let runs = 0;
        const call = () =>
          e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
            runs++;
            return { result: 'done' };
          });
        proxy.inject({ operation: 'UpdateItem', fault: 'fail', times: 100 }); // both the completion and the UNKNOWN mark
        expect(await call()).toMatchObject({ outcome: 'unknown' });
        proxy.clear();
        expect(await stored(key)).toMatchObject({ status: 'PROCESSING' });
        expect(await call()).toMatchObject({ outcome: 'in_progress' });
        clock.advance(11_000); // past the lease
        expect(await call()).toMatchObject({ outcome: 'unknown' });
        expect(await stored(key)).toMatchObject({ status: 'UNKNOWN', error_type: 'lease_expired' });
        expect(runs).toBe(1);
      },
    );

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'a claim that fails runs nothing, answers unknown (the key may have run before) and leaves the key free',
      async () => {
        const e = engine();
        const key = newKey();
        let runs = 0;
        const call = () =>
          e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
            runs++;
            return { result: 'done' };
          });
        proxy.inject({ operation: 'PutItem', fault: 'fail', times: 100 });
        const answer = await call();
        expect(answer).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'STORE_UNAVAILABLE' } });
        expect(answer.retry_after_ms).toBeGreaterThan(0);
        expect(answer.error?.message).not.toMatch(/nothing was executed/);
        expect(runs).toBe(0);
        proxy.clear();
        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: false });
        expect(runs).toBe(1);
      },
    );
    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'a retry of a call that succeeded, while the store refuses the claim, is not told that it failed',
      async () => {
        const e = engine();
        const key = newKey();
        let runs = 0;
        const call = () => e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({ result: ++runs }));
        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: false });
        proxy.inject({ operation: 'PutItem', fault: 'fail', times: 100 });
        expect(await call()).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'STORE_UNAVAILABLE' } });
        proxy.clear();
        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: true, result: 1 });
        expect(runs).toBe(1);
      },
    );
  });

  describe('answers lost on the way back (applied by DynamoDB, retried by the SDK)', () => {
    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')('a lost claim answer: the retried claim finds its own record and the call executes once', async () => {
      const e = engine();
      const key = newKey();
      let runs = 0;
      proxy.inject({ operation: 'PutItem', fault: 'drop-response', times: 1 });
      const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({ result: ++runs }));
      expect(proxy.faulted()).toEqual([1]);
      expect(answer).toMatchObject({ outcome: 'succeeded', replayed: false, result: 1 });
      expect(await stored(key)).toMatchObject({ status: 'SUCCEEDED' });
    });

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'a claim sent twice (its first answer lost) is never released with "nothing ran": a transient failure is UNKNOWN',
      async () => {
        const e = engine();
        const key = newKey();
        let runs = 0;
        proxy.inject({ operation: 'PutItem', fault: 'drop-response', times: 1 });
        const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
          runs++;
          throw new TransientToolError('UPSTREAM_BUSY', 'try later');
        });
        expect(proxy.faulted()).toEqual([1]);
        // An earlier attempt of the claim could still land after a release and recreate the record: the key is kept
        // as UNKNOWN (the reconciler frees it) and the answer says so, as for any outcome the store cannot vouch for.
        expect(answer).toMatchObject({ outcome: 'unknown', retryable: true });
        expect(await stored(key)).toMatchObject({ status: 'UNKNOWN' });
        expect(runs).toBe(1);
      },
    );

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      "a lost completion answer: reported as this call's success, not as a replay, not as unknown",
      async () => {
        const e = engine();
        const key = newKey();
        proxy.inject({ operation: 'UpdateItem', fault: 'drop-response', times: 1, bodyIncludes: 'SUCCEEDED' });
        const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({ result: 'done' }));
        expect(proxy.faulted()).toEqual([1]);
        expect(answer).toMatchObject({ outcome: 'succeeded', replayed: false, result: 'done' });
        expect(await stored(key)).toMatchObject({ status: 'SUCCEEDED' });
      },
    );

    it('a lost transaction answer: the business write commits once and the call succeeds', async () => {
      const e = engine();
      const key = newKey();
      const orderId = `order-${key}`;
      proxy.inject({ operation: 'TransactWriteItems', fault: 'drop-response', times: 1 });
      const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({
        result: { order_id: orderId },
        writes: [orderWrite(TENANT, orderId)],
      }));
      expect(proxy.faulted()).toEqual([1]);
      expect(answer).toMatchObject({ outcome: 'succeeded', replayed: false, result: { order_id: orderId } });
      expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toBeDefined();
    });
  });
});
