import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TerminalToolError, UncertainToolError } from '../../lambdas/core/errors';
import { fingerprint } from '../../lambdas/core/fingerprint';
import type { IdempotencyRecord } from '../../lambdas/core/state-machine';
import type { IdempotencyPolicy } from '../../lambdas/core/tool-policy';
import type { EngineOptions } from '../../lambdas/engine/engine';
import type { ExecutionContext } from '../../lambdas/engine/write-request';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { countDynamoDbRequests } from '../support/dynamodb-request-counter';
import { createTestTable } from '../support/dynamodb';
import { deferred, manualClock, newKey, orderItem, orderWrite, storedItem, ENGINE_PATHS, effectLedger, engineFor } from '../support/engine';

const TOOL = 'request_payment';
const TENANT = 'tenant-expiry';
const HOUR = 3600_000;

let table: Awaited<ReturnType<typeof createTestTable>>;
let store: DynamoDbIdempotencyStore;
beforeAll(async () => {
  table = await createTestTable();
  store = new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName });
});
afterAll(() => table.drop());

describe.each(ENGINE_PATHS)('$path path', ({ effect }) => {
  function setup(options: Partial<EngineOptions> = {}) {
    const clock = manualClock();
    const engine = engineFor(effect, { store, clock: clock.clock, ...options });
    const key = newKey();
    const effects = effectLedger(effect, table);
    let runs = 0;
    const call = (policy: IdempotencyPolicy, args: Record<string, unknown> = { amount: 100 }) =>
      engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args }, policy, async () => ({
        result: { run: ++runs },
        ...effects.act(),
      }));
    return { clock, engine, key, call, effects, runs: () => effects.count() };
  }

  describe('retention and expiry (the claim condition does the work: DynamoDB Local never deletes)', () => {
    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'policy execute: replays within retention, executes again after it, even with other arguments',
      async () => {
        const { clock, call, runs } = setup();
        const policy: IdempotencyPolicy = { retentionSeconds: 3600, onExpired: 'execute' };
        expect(await call(policy)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 1 } });
        clock.advance(HOUR - 1000);
        expect(await call(policy)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { run: 1 } });
        clock.advance(1000);
        expect(await call(policy)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 2 } });
        clock.advance(HOUR);
        // Past retention the key is free again: other arguments are a new operation, not a conflict.
        expect(await call(policy, { amount: 5 })).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 3 } });
        expect(await runs()).toBe(3);
      },
    );

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'policy review: after retention answers REVIEW_REQUIRED and runs nothing, until the review window ends',
      async () => {
        const { clock, call, runs } = setup();
        const policy: IdempotencyPolicy = { retentionSeconds: 3600, onExpired: 'review', reviewWindowSeconds: 7200 };
        await call(policy);
        clock.advance(HOUR - 1000);
        expect(await call(policy)).toMatchObject({ outcome: 'succeeded', replayed: true });
        clock.advance(1000);
        expect(await call(policy)).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'REVIEW_REQUIRED' } });
        clock.advance(2 * HOUR - 1000);
        expect(await call(policy)).toMatchObject({ error: { code: 'REVIEW_REQUIRED' } });
        expect(await runs()).toBe(1);
        clock.advance(1000);
        expect(await call(policy)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 2 } });
        expect(await runs()).toBe(2);
      },
    );

    it('a tool that moved from review to execute executes again after retention, though the old record is kept longer', async () => {
      const { clock, call, runs } = setup();
      await call({ retentionSeconds: 3600, onExpired: 'review' });
      clock.advance(HOUR);
      expect(await call({ retentionSeconds: 3600, onExpired: 'execute' })).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(await runs()).toBe(2);
    });

    it('a terminal failure expires like a success', async () => {
      const { clock, engine, key, effects } = setup();
      const call = () =>
        engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, { retentionSeconds: 60 }, async () => {
          effects.act();
          throw new TerminalToolError('DECLINED', 'declined');
        });
      expect(await call()).toMatchObject({ outcome: 'failed', replayed: false });
      expect(await call()).toMatchObject({ outcome: 'failed', replayed: true });
      clock.advance(60_000);
      expect(await call()).toMatchObject({ outcome: 'failed', replayed: false });
      // Two declined calls reached the downstream; a local tool's failures committed no item, only their record.
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 2);
    });
  });

  describe('unsettled records do not expire', () => {
    it('an UNKNOWN outcome is never freed by time: long after retention a retry still does not execute', async () => {
      const { clock, engine, key, effects } = setup();
      const call = () =>
        engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, { retentionSeconds: 60 }, async () => {
          effects.act();
          throw new UncertainToolError('TIMEOUT', 'no answer after sending');
        });
      expect(await call()).toMatchObject({ outcome: 'unknown' });
      clock.advance(48 * HOUR);
      expect(await call()).toMatchObject({ outcome: 'unknown' });
      // A local tool acts only by committing: its uncertain failure committed nothing.
      expect(await effects.count()).toBe(effect === 'local' ? 0 : 1);
    });
  });

  /** A PROCESSING record whose executor vanished (a crashed Lambda): claimed through the real store, never settled. */
  async function abandonedRecord(key: string, now: number, args: Record<string, unknown>) {
    const record: IdempotencyRecord = {
      tenant: TENANT,
      tool: TOOL,
      idempotencyKey: key,
      fingerprint: fingerprint(args),
      status: 'PROCESSING',
      ownerToken: randomUUID(),
      createdAt: now,
      updatedAt: now,
      leaseExpiresAt: now + 11_000,
      retainUntil: now + 24 * HOUR,
      expiresAt: Math.floor((now + 24 * HOUR) / 1000),
    };
    expect(await store.claim(record, now)).toEqual({ claimed: true });
    return record;
  }

  describe('a stale lease', () => {
    it('is answered in progress while the lease lasts', async () => {
      const { clock, call, key, runs } = setup({ inProgressWaitMs: 50 });
      await abandonedRecord(key, clock.clock(), { amount: 100 });
      clock.advance(10_000);
      expect(await call({})).toMatchObject({ outcome: 'in_progress', retryable: true });
      expect(await runs()).toBe(0);
    });

    it('tool not safe to re-execute: becomes UNKNOWN and nothing runs', async () => {
      const { clock, call, key, runs } = setup();
      const abandoned = await abandonedRecord(key, clock.clock(), { amount: 100 });
      clock.advance(11_000);
      expect(await call({ reexecuteSafe: false })).toMatchObject({
        outcome: 'unknown',
        retryable: true,
        error: { code: 'OUTCOME_UNKNOWN' },
      });
      expect(await call({ reexecuteSafe: false })).toMatchObject({ outcome: 'unknown' });
      expect(await runs()).toBe(0);
      const item = await storedItem(table.doc, table.tableName, TENANT, TOOL, key);
      expect(item).toMatchObject({ status: 'UNKNOWN', error_type: 'lease_expired', owner_token: abandoned.ownerToken });
      expect(String(item!.attention_pk)).toMatch(/^UNKNOWN#/); // queued for the reconciler
    });

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'tool safe to re-execute: concurrent callers take over once, with a new owner token, and execute once',
      async () => {
        const { clock, engine, key } = setup();
        const abandoned = await abandonedRecord(key, clock.clock(), { amount: 100 });
        clock.advance(11_000);
        let runs = 0;
        const tokens: string[] = [];
        const answers = await Promise.all(
          Array.from({ length: 5 }, () =>
            engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 100 } }, { reexecuteSafe: true }, async (ctx) => {
              runs++;
              tokens.push(ctx.idempotencyKey);
              await new Promise((r) => setTimeout(r, 100));
              return { result: { paid: true } };
            }),
          ),
        );
        expect(runs).toBe(1);
        expect(tokens).toEqual([key]); // the downstream gets our key to dedup on
        expect(answers.filter((a) => a.outcome === 'succeeded' && !a.replayed)).toHaveLength(1);
        for (const a of answers) expect(['succeeded', 'in_progress']).toContain(a.outcome);
        const item = await storedItem(table.doc, table.tableName, TENANT, TOOL, key);
        expect(item).toMatchObject({ status: 'SUCCEEDED', result: { paid: true }, created_at: abandoned.createdAt });
        expect(item!.owner_token).not.toBe(abandoned.ownerToken);
      },
    );
  });

  describe('a late executor', () => {
    /** Executor A runs and stalls; the clock passes its lease; B arrives. Returns A's pending answer and a way to let A finish. */
    async function stalledFirstExecutor(reexecuteSafe: boolean) {
      const clock = manualClock();
      const engine = engineFor(effect, { store, clock: clock.clock });
      const key = newKey();
      const started = deferred<ExecutionContext>();
      const finish = deferred();
      const policy: IdempotencyPolicy = { reexecuteSafe, executionTimeoutMs: 20_000 };
      const first = engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, policy, async (ctx) => {
        started.resolve(ctx);
        await finish.promise;
        return { result: { by: 'A' }, writes: [orderWrite(TENANT, `A-${key}`)] };
      });
      await started.promise;
      clock.advance(21_001 + 1000); // past A's lease (budget + completion margin)
      return { clock, engine, key, first, finish, policy };
    }

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'is fenced out after a takeover: its completion and its writes do not commit, and it answers with the takeover result',
      async () => {
        const { engine, key, first, finish, policy } = await stalledFirstExecutor(true);
        const second = await engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, policy, async () => ({
          result: { by: 'B' },
          writes: [orderWrite(TENANT, `B-${key}`)],
        }));
        expect(second).toMatchObject({ outcome: 'succeeded', replayed: false, result: { by: 'B' } });
        const takeoverToken = (await storedItem(table.doc, table.tableName, TENANT, TOOL, key))!.owner_token;

        finish.resolve();
        expect(await first).toMatchObject({ outcome: 'succeeded', replayed: true, result: { by: 'B' } });
        expect(await orderItem(table.doc, table.tableName, TENANT, `A-${key}`)).toBeUndefined();
        expect(await orderItem(table.doc, table.tableName, TENANT, `B-${key}`)).toBeDefined();
        expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({
          status: 'SUCCEEDED',
          result: { by: 'B' },
          owner_token: takeoverToken,
        });
      },
    );

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'is fenced out once its stale lease was marked UNKNOWN: its writes do not commit and the record stays UNKNOWN',
      async () => {
        const { engine, key, first, finish, policy } = await stalledFirstExecutor(false);
        let runs = 0;
        const second = await engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { amount: 1 } }, policy, async () => {
          runs++;
          return { result: { by: 'B' } };
        });
        expect(second).toMatchObject({ outcome: 'unknown' });
        expect(runs).toBe(0);
        finish.resolve();
        expect(await first).toMatchObject({ outcome: 'unknown' });
        expect(await orderItem(table.doc, table.tableName, TENANT, `A-${key}`)).toBeUndefined();
        expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toMatchObject({
          status: 'UNKNOWN',
          error_type: 'lease_expired',
        });
      },
    );
  });

  describe('the execution budget', () => {
    it('turns a hung executor into UNKNOWN at the Lambda deadline less the margin, and aborts its signal', async () => {
      const clock = manualClock();
      const claimedAt = clock.clock();
      const engine = engineFor(effect, { store, clock: clock.clock, completionMarginMs: 1000 });
      const key = newKey();
      let signal: AbortSignal | undefined;
      let deadline = 0;
      const answer = await engine.run(
        { tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {}, remainingTimeMs: () => 1200 },
        { executionTimeoutMs: 60_000 },
        (ctx) => {
          signal = ctx.signal;
          deadline = ctx.deadline;
          return new Promise<never>(() => {}); // hangs forever
        },
      );
      expect(answer).toMatchObject({ outcome: 'unknown', retryable: true });
      expect(signal?.aborted).toBe(true);
      expect(deadline - claimedAt).toBe(200); // 1200 ms left less the 1000 ms completion margin
      const item = await storedItem(table.doc, table.tableName, TENANT, TOOL, key);
      expect(item).toMatchObject({ status: 'UNKNOWN', error_type: 'uncertain' });
      // The lease covers the budget and the margin.
      expect(Number(item!.lease_expires_at) - Number(item!.created_at)).toBe(1200);
    });

    it('refuses to start without time left: nothing runs and nothing is even claimed', async () => {
      const doc = createDynamoDbClient({ endpoint: table.endpoint });
      const requests = countDynamoDbRequests(doc);
      const engine = engineFor(effect, {
        store: new DynamoDbIdempotencyStore({ client: doc, tableName: table.tableName }),
        completionMarginMs: 1000,
      });
      const key = newKey();
      let runs = 0;
      const answer = await engine.run(
        { tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {}, remainingTimeMs: () => 900 },
        {},
        async () => {
          runs++;
          return { result: 1 };
        },
      );
      expect(answer).toMatchObject({ outcome: 'failed', retryable: true, error: { code: 'TRANSIENT_FAILURE' } });
      expect(runs).toBe(0);
      expect(requests.total()).toBe(0);
      expect(await storedItem(table.doc, table.tableName, TENANT, TOOL, key)).toBeUndefined();
      closeDynamoDbClient(doc);
    });
  });

  describe('waiting for a running first call', () => {
    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')(
      'is bounded: a duplicate answers in_progress with retry_after_ms while the first call still runs, even on a frozen clock',
      async () => {
        const clock = manualClock(); // never advanced: the wait must end by itself
        const engine = engineFor(effect, { store, clock: clock.clock, inProgressWaitMs: 300 });
        const key = newKey();
        const finish = deferred();
        let runs = 0;
        const call = () =>
          engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
            runs++;
            await finish.promise;
            return { result: 'done' };
          });
        const first = call();
        await expect.poll(() => runs).toBe(1);
        const duplicate = await call();
        expect(duplicate).toMatchObject({
          outcome: 'in_progress',
          replayed: false,
          retryable: true,
          error: { code: 'OPERATION_IN_PROGRESS' },
        });
        expect(duplicate.retry_after_ms).toBeGreaterThan(0);
        finish.resolve();
        expect(await first).toMatchObject({ outcome: 'succeeded' });
        expect(await call()).toMatchObject({ outcome: 'succeeded', replayed: true, result: 'done' });
        expect(runs).toBe(1);
      },
    );

    // The claimed path's own mechanics; the one-request path's are in one-request.test.ts.
    it.skipIf(effect === 'local')('returns the result when the first call finishes within the wait', async () => {
      const engine = engineFor(effect, { store, inProgressWaitMs: 10_000 });
      const key = newKey();
      const finish = deferred();
      const effects = effectLedger(effect, table);
      let runs = 0;
      const call = () =>
        engine.run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: {} }, {}, async () => {
          runs++;
          await finish.promise;
          return { result: 'done', ...effects.act() };
        });
      const first = call();
      await expect.poll(() => runs).toBe(1);
      const duplicate = call();
      setTimeout(() => finish.resolve(), 200);
      expect(await duplicate).toMatchObject({ outcome: 'succeeded', replayed: true, result: 'done' });
      await first;
      expect(await effects.count()).toBe(1);
    });
  });
});
