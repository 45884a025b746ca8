import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { describeStats, EXPLORED, newStats, raceProperty, REAL, runParameters } from './support/races';

/**
 * Issue 23 item 5: fast-check's scheduler drives the real engine, the real in-memory store and the real reconciler's
 * per-record step through thousands of interleavings of two or three callers on one to three keys, crashes and store
 * faults at any await, downstream faults, lease expiry, reconciler passes, the one-request path of local tools,
 * retention expiry and operators settling by hand. docs/correctness.md ("Races on the real
 * engine") says what is explored, which promise each invariant checks, and how to replay a failure (FC_SEED, FC_PATH).
 */
const RUNS = 2_500;

describe('races on the real engine (in-memory store)', () => {
  // The engine's execution deadline is a timer: fake timers move with the run's clock, so a hung call meets it.
  beforeAll(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterAll(() => vi.useRealTimers());

  it('keeps every invariant in every explored interleaving', { timeout: 120_000 }, async () => {
    const stats = newStats();
    const started = performance.now();
    await fc.assert(raceProperty(REAL, EXPLORED, stats), runParameters(RUNS));
    console.info(`engine races: ${describeStats(stats)}, in ${Math.round(performance.now() - started)} ms`);
    // The exploration reached the cases that matter, not only quiet runs.
    expect(stats.withCrash).toBeGreaterThan(stats.runs / 10);
    expect(stats.withEffect).toBeGreaterThan(stats.runs / 4);
    for (const reached of [stats.withOneRequestCommit, stats.withKeys, stats.withExpiry, stats.withOperatorDecision, stats.withRememberedKey]) {
      expect(reached).toBeGreaterThan(stats.runs / 50);
    }
  });
});
