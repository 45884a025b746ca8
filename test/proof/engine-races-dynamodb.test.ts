import { GetCommand } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';
import { checkRun, describeStats, newStats, runParameters, runScenario, START } from './support/races';
import { worldClock } from './support/races-actors';
import { EXPLORED, scenarioArbitrary } from './support/races-scenarios';

/**
 * The race exploration of engine-races.test.ts, smaller, on DynamoDB Local: the real DynamoDB store and the real
 * reconciler's `runOnce` (it finds records through the attention index). Store calls are real requests, one at a
 * time, in the order the scheduler picks. No fake timers here (the HTTP client has timers of its own), so no fault
 * that only the engine's deadline timer ends.
 */
const RUNS = 25;
/** The in-memory exploration's mix (engine-races.test.ts), without the faults that only the deadline timer ends. */
const DYNAMODB_SCENARIOS = { ...EXPLORED, hangs: false, maxDriverSteps: 5 };

let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

describe('races on the real engine (DynamoDB Local)', () => {
  it('keeps every invariant in every explored interleaving', { timeout: 300_000 }, async () => {
    const stats = newStats();
    const store = new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName });
    let run = 0;
    const started = performance.now();
    const property = fc.asyncProperty(fc.scheduler(), scenarioArbitrary(DYNAMODB_SCENARIOS), async (scheduler, scenario) => {
      // Runs share the table: each has its own key, and a clock that starts after the previous run's.
      run++;
      let keys = 0;
      const world = await runScenario({
        scheduler,
        scenario,
        variant: { name: 'the real code' },
        key: `key-race-${run}-${Math.random().toString(36).slice(2)}`,
        store,
        clock: worldClock(START + run * 10_000_000, false),
        newKey: () => `key-race-${run}-new-${++keys}`,
        peek: (identity) => store.get(identity),
        peekItem: async (key) =>
          (await table.doc.send(new GetCommand({ TableName: table.tableName, Key: key, ConsistentRead: true }))).Item,
        index: true,
        stuckAfterMs: 30_000,
      });
      await checkRun(world, scheduler, stats);
    });
    await fc.assert(property, runParameters(RUNS));
    console.info(`engine races on DynamoDB Local: ${describeStats(stats)}, in ${Math.round(performance.now() - started)} ms`);
    expect(stats.withEffect).toBeGreaterThan(0);
  });
});
