import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TerminalToolError } from '../../lambdas/core/errors';
import { fingerprint } from '../../lambdas/core/fingerprint';
import type { EngineOptions } from '../../lambdas/engine/engine';
import type { Executor } from '../../lambdas/engine/write-request';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { createTestTable } from '../support/dynamodb';
import { countDynamoDbRequests } from '../support/dynamodb-request-counter';
import { deferred, manualClock, newKey, orderItem, orderWrite, storedItem, ENGINE_PATHS, effectLedger, engineFor } from '../support/engine';

const TOOL = 'create_order';
const TENANT = 'tenant-alpha';

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(() => table.drop());

describe.each(ENGINE_PATHS)('$path path', ({ effect }) => {
  function engine(options: Partial<EngineOptions> = {}) {
    return engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName }), ...options });
  }

  /** A tool that counts its executions and returns which one answered; its effects are counted where they land. */
  function countingTool<R>(result: (n: number) => R, hold?: Promise<void>) {
    const tool = { runs: 0, effects: effectLedger(effect, table), executor: undefined as unknown as Executor<R> };
    tool.executor = async () => {
      const n = ++tool.runs;
      // The effect happens as the tool runs (a downstream call), before it answers.
      const effect = tool.effects.act();
      await hold;
      return { result: result(n), ...effect };
    };
    return tool;
  }

  describe('duplicates of one call', () => {
    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      '50 concurrent identical calls execute once; every other answer replays that result or is in progress',
      async () => {
        const release = deferred();
        const tool = countingTool((n) => ({ order_id: `order-${n}` }), release.promise);
        const e = engine();
        const key = newKey();
        const calls = Array.from({ length: 50 }, () =>
          e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { sku: 'A-1', quantity: 2 } }, {}, tool.executor),
        );
        // Let every call reach the store while the first execution is still running.
        setTimeout(() => release.resolve(), 300);
        const answers = await Promise.all(calls);

        expect(await tool.effects.count()).toBe(1);
        const fresh = answers.filter((a) => a.outcome === 'succeeded' && !a.replayed);
        expect(fresh).toHaveLength(1);
        expect(fresh[0]!.result).toEqual({ order_id: 'order-1' });
        for (const answer of answers) {
          if (answer === fresh[0]) continue;
          if (answer.outcome === 'in_progress') {
            expect(answer).toMatchObject({ retryable: true, error: { code: 'OPERATION_IN_PROGRESS' } });
          } else {
            expect(answer).toMatchObject({ outcome: 'succeeded', replayed: true, result: { order_id: 'order-1' } });
          }
        }
      },
    );

    it('replays arguments given in another key order, nested objects included', async () => {
      const tool = countingTool((n) => ({ n }));
      const e = engine();
      const key = newKey();
      const first = await e.run(
        { tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { customer: { id: 'c-1', tier: 'gold' }, items: [{ sku: 'A', qty: 1 }] } },
        {},
        tool.executor,
      );
      const reordered = await e.run(
        { tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { items: [{ qty: 1, sku: 'A' }], customer: { tier: 'gold', id: 'c-1' } } },
        {},
        tool.executor,
      );
      expect(first).toMatchObject({ outcome: 'succeeded', replayed: false, result: { n: 1 } });
      expect(reordered).toMatchObject({ outcome: 'succeeded', replayed: true, result: { n: 1 } });
      expect(await tool.effects.count()).toBe(1);
    });

    it('replays arguments that differ only in trace fields (defaults and a tool-declared one)', async () => {
      const tool = countingTool((n) => ({ n }));
      const e = engine();
      const key = newKey();
      const policy = { nonBusinessFields: ['trace_id', 'request_id', 'requested_at', 'client_note'] };
      const call = (args: Record<string, unknown>) =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args }, policy, tool.executor);
      await call({ amount: 10, trace_id: 't-1', request_id: 'r-1', requested_at: '2030-01-01T00:00:00Z', client_note: 'first' });
      const retried = await call({
        amount: 10,
        trace_id: 't-2',
        request_id: 'r-2',
        requested_at: '2030-01-01T00:00:05Z',
        client_note: 'retry',
      });
      const bare = await call({ amount: 10 });
      expect(retried).toMatchObject({ outcome: 'succeeded', replayed: true });
      expect(bare).toMatchObject({ outcome: 'succeeded', replayed: true });
      expect(await tool.effects.count()).toBe(1);
    });

    it('a replay carries the first execution time and the same result', async () => {
      const clock = manualClock(Date.UTC(2030, 0, 2, 3, 4, 5, 678));
      const tool = countingTool((n) => ({ n }));
      const e = engine({ clock: clock.clock });
      const key = newKey();
      const call = () =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { a: 1 } }, {}, async (ctx) => {
          clock.advance(1500); // the first call completes later than it started: the replay names its start
          return tool.executor(ctx);
        });
      const first = await call();
      clock.advance(60_000);
      const replay = await call();
      expect(first.first_executed_at).toBeUndefined();
      expect(replay).toMatchObject({ replayed: true, result: { n: 1 }, first_executed_at: '2030-01-02T03:04:05.678Z' });
    });
  });

  describe('the same key with other arguments', () => {
    const conflict = { outcome: 'conflict', retryable: false, error: { code: 'IDEMPOTENCY_KEY_REUSED' } };

    it('conflicts after a success, and nothing runs', async () => {
      const tool = countingTool((n) => ({ n }));
      const e = engine();
      const key = newKey();
      await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 10 } }, {}, tool.executor);
      const other = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 11 } }, {}, tool.executor);
      expect(other).toMatchObject(conflict);
      expect(await tool.effects.count()).toBe(1);
    });

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')('conflicts at once while the first call is still running, and nothing runs', async () => {
      const release = deferred();
      const tool = countingTool((n) => ({ n }), release.promise);
      // A conflict must not wait for the first call: a long wait would hang this test.
      const e = engine({ inProgressWaitMs: 60_000 });
      const key = newKey();
      const first = e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 10 } }, {}, tool.executor);
      await expect.poll(() => tool.runs).toBe(1);
      const other = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 99 } }, {}, tool.executor);
      expect(other).toMatchObject(conflict);
      release.resolve();
      expect(await first).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(await tool.effects.count()).toBe(1);
    });

    it('conflicts after a terminal failure, and nothing runs', async () => {
      const effects = effectLedger(effect, table);
      const e = engine();
      const key = newKey();
      await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 10 } }, {}, async () => {
        effects.act();
        throw new TerminalToolError('CARD_DECLINED', 'the card was declined');
      });
      const other = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 5 } }, {}, async () => ({
        result: 'should not run',
        ...effects.act(),
      }));
      expect(other).toMatchObject(conflict);
      // The declined call reached the downstream once; a local tool's failure committed nothing.
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 1);
      expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({ status: 'FAILED' });
    });

    it('conflicts while the outcome is unknown, and nothing runs', async () => {
      const effects = effectLedger(effect, table);
      const e = engine();
      const key = newKey();
      const first = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 10 } }, {}, async () => {
        effects.act();
        throw new Error('socket hang up after sending'); // unclassified: may have happened
      });
      expect(first.outcome).toBe('unknown');
      const other = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 5 } }, {}, async () => ({
        result: 'should not run',
        ...effects.act(),
      }));
      expect(other).toMatchObject(conflict);
      // A local tool acts only by committing: its uncertain failure committed nothing.
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 1);
    });
  });

  describe('identity', () => {
    it('two tenants with the same key and tool are independent', async () => {
      const tool = countingTool((n) => ({ n }));
      const e = engine();
      const key = newKey();
      const a = await e.run({ tenant: 'tenant-aaaa', tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, {}, tool.executor);
      const b = await e.run({ tenant: 'tenant-bbbb', tool: TOOL, idempotencyKey: key, args: { amount: 2 } }, {}, tool.executor);
      const aAgain = await e.run({ tenant: 'tenant-aaaa', tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, {}, tool.executor);
      expect(a).toMatchObject({ outcome: 'succeeded', replayed: false, result: { n: 1 } });
      expect(b).toMatchObject({ outcome: 'succeeded', replayed: false, result: { n: 2 } });
      expect(aAgain).toMatchObject({ outcome: 'succeeded', replayed: true, result: { n: 1 } });
      expect(await tool.effects.count()).toBe(2);
    });

    it('the same key on two tools is two operations', async () => {
      const tool = countingTool((n) => ({ n }));
      const e = engine();
      const key = newKey();
      await e.run({ tenant: TENANT, tool: 'send_email', idempotencyKey: key, args: { to: 'a' } }, {}, tool.executor);
      const other = await e.run({ tenant: TENANT, tool: 'create_ticket', idempotencyKey: key, args: { title: 'b' } }, {}, tool.executor);
      expect(other).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(await tool.effects.count()).toBe(2);
    });

    it.each([
      ['empty', ''],
      ['7 characters', 'abcdefg'],
      ['129 characters', 'k'.repeat(129)],
      ['a space', 'key with space'],
      ['a path', '../../etc/passwd'],
      ['non-ASCII', 'clé-de-commande'],
      ['a storage separator', 'key#00000001'],
      ['not a string', 12345678],
      ['missing', undefined],
    ])('refuses a key that is %s: nothing runs, nothing is sent to DynamoDB', async (_, badKey) => {
      const doc = createDynamoDbClient({ endpoint: table.endpoint });
      const requests = countDynamoDbRequests(doc);
      const e = engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }) });
      let runs = 0;
      const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: badKey, args: { a: 1 } }, {}, async () => {
        runs++;
        return { result: 1 };
      });
      expect(answer).toMatchObject({ outcome: 'rejected', retryable: false, error: { code: 'INVALID_IDEMPOTENCY_KEY' } });
      expect(runs).toBe(0);
      expect(requests.total()).toBe(0);
      closeDynamoDbClient(doc);
    });

    it('refuses a bad tenant id the same way: nothing runs, nothing is sent to DynamoDB', async () => {
      const doc = createDynamoDbClient({ endpoint: table.endpoint });
      const requests = countDynamoDbRequests(doc);
      const e = engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }) });
      let runs = 0;
      for (const tenant of ['', 'x', 't'.repeat(129), 'tenant/../x', 'tenant a b', 'tenant#other']) {
        const answer = await e.run({ tenant, tool: TOOL, idempotencyKey: newKey(), args: {} }, {}, async () => {
          runs++;
          return { result: 1 };
        });
        expect(answer).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_TENANT' } });
      }
      expect(runs).toBe(0);
      expect(requests.total()).toBe(0);
      closeDynamoDbClient(doc);
    });

    it('accepts keys of 8 and 128 characters from the whole alphabet', async () => {
      const e = engine();
      for (const key of ['Az09._:-', `${'aZ9._:-'.repeat(18)}ab`]) {
        expect(key.length === 8 || key.length === 128).toBe(true);
        const answer = await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => ({ result: key.length }));
        expect(answer).toMatchObject({ outcome: 'succeeded', result: key.length });
      }
    });
  });

  describe('the stored record', () => {
    it('holds key, fingerprint, status, result, created/updated, trace id, owner token, lease and expiry', async () => {
      const clock = manualClock(Date.UTC(2030, 5, 1));
      const e = engine({ clock: clock.clock });
      const key = newKey();
      const args = { amount: 42, trace_id: 'trace-1234' };
      await e.run(
        { tenant: TENANT, tool: TOOL, idempotencyKey: key, args, traceId: 'trace-1234' },
        { retentionSeconds: 3600, executionTimeoutMs: 5000 },
        async () => {
          clock.advance(250);
          return { result: { order_id: 'o-1' } };
        },
      );
      const item = await storedItem(table.doc, table.tableName, TENANT, TOOL, key);
      const t0 = Date.UTC(2030, 5, 1);
      expect(item).toMatchObject({
        pk: `IDEM#${TENANT}#${TOOL}#${key}`, // tenant, tool and key: the record's identity is its key
        fingerprint: fingerprint(args),
        status: 'SUCCEEDED',
        result: { order_id: 'o-1' },
        created_at: t0,
        updated_at: t0 + 250,
        trace_id: 'trace-1234',
        lease_expires_at: t0 + 5000 + 1000,
        retain_until: t0 + 3600_000,
        expires_at: Math.floor((t0 + 3600_000) / 1000),
      });
      expect(item!.owner_token).toMatch(/^[0-9a-f-]{36}$/);
      // Settled records leave the attention index the reconciler reads.
      expect(item!.attention_pk).toBeUndefined();
      // The trace id is kept beside the record, never hashed into the fingerprint.
      expect(item!.fingerprint).toBe(fingerprint({ amount: 42 }));
    });

    it('holds the error and its type for a terminal failure', async () => {
      const e = engine();
      const key = newKey();
      await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
        throw new TerminalToolError('CARD_DECLINED', 'the card was declined');
      });
      const item = await storedItem(table.doc, table.tableName, TENANT, TOOL, key);
      expect(item).toMatchObject({
        status: 'FAILED',
        error_type: 'terminal',
        error: { code: 'CARD_DECLINED', message: 'the card was declined' },
      });
    });
  });

  describe('DynamoDB requests per call', () => {
    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')('a first call with one business write costs 2 requests, a replay 1, a conflict 1', async () => {
      const doc = createDynamoDbClient({ endpoint: table.endpoint });
      const requests = countDynamoDbRequests(doc);
      const e = engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }) });
      const key = newKey();
      const orderId = `order-${key}`;
      const call = (amount: number) =>
        e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount } }, {}, async () => ({
          result: { order_id: orderId },
          writes: [orderWrite(TENANT, orderId)],
        }));

      expect(await call(1)).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(requests.byOperation).toEqual({ PutItem: 1, TransactWriteItems: 1 });
      expect(await orderItem(table.doc, table.tableName, TENANT, orderId)).toMatchObject({ order_id: orderId });

      requests.reset();
      expect(await call(1)).toMatchObject({ outcome: 'succeeded', replayed: true });
      expect(requests.byOperation).toEqual({ PutItem: 1 });

      requests.reset();
      expect(await call(2)).toMatchObject({ outcome: 'conflict' });
      expect(requests.byOperation).toEqual({ PutItem: 1 });
      closeDynamoDbClient(doc);
    });

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')('a first call without extra writes costs 2 requests (claim and completion)', async () => {
      const doc = createDynamoDbClient({ endpoint: table.endpoint });
      const requests = countDynamoDbRequests(doc);
      const e = engineFor(effect, { store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }) });
      await e.run({ tenant: TENANT, tool: TOOL, idempotencyKey: newKey(), args: {} }, {}, async () => ({ result: 1 }));
      expect(requests.byOperation).toEqual({ PutItem: 1, UpdateItem: 1 });
      closeDynamoDbClient(doc);
    });
  });
});
