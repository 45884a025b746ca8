import { readFileSync, writeFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { describeStats, newStats, raceProperty, runParameters } from './support/races';
import { REAL } from './support/races-actors';
import { EXPLORED, LATE_LANDINGS } from './support/races-scenarios';

/**
 * Issue 23 item 5: fast-check's scheduler drives the real engine, the real in-memory store and the real reconciler's
 * per-record step through thousands of interleavings of two or three callers on one to three keys, crashes and store
 * faults at any await, downstream faults, lease expiry, reconciler passes, the one-request path of local tools,
 * retention expiry and operators settling by hand. docs/correctness.md ("Races on the real
 * engine") says what is explored, which promise each invariant checks, and how to replay a failure (FC_SEED, FC_PATH).
 */
const RUNS = 2_500;
/** Runs of the late-landing exploration (issue 48 item 7). */
const LATE_RUNS = 1_000;

/**
 * Every run the exploration ever failed on, replayed on every test run (issue 30 item 6): a failing exploration adds
 * its seed and path here itself, so the counterexample is kept once the bug is fixed (name it when you commit it).
 */
const REGRESSIONS_FILE = new URL('./race-regressions.json', import.meta.url);
interface Regression {
  name: string;
  seed: number;
  path: string;
}
const regressions = (): Regression[] => JSON.parse(readFileSync(REGRESSIONS_FILE, 'utf8')) as Regression[];

function keepRegression(seed: number, path: string, failure: string) {
  const kept = regressions();
  if (kept.some((r) => r.seed === seed && r.path === path)) return;
  kept.push({ name: `found ${new Date().toISOString().slice(0, 10)}: ${failure.split('\n')[0]!.slice(0, 200)}`, seed, path });
  writeFileSync(REGRESSIONS_FILE, `${JSON.stringify(kept, null, 2)}\n`);
}

describe('races on the real engine (in-memory store)', () => {
  // The engine's execution deadline is a timer: fake timers move with the run's clock, so a hung call meets it.
  beforeAll(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterAll(() => vi.useRealTimers());

  it('keeps every invariant in every explored interleaving', { timeout: 120_000 }, async () => {
    const stats = newStats();
    const started = performance.now();
    const parameters = runParameters(RUNS);
    const details = await fc.check(raceProperty(REAL, EXPLORED, stats), parameters);
    if (details.failed) {
      // A new failure is kept before it is reported (a replay, FC_PATH, is one kept already).
      if (parameters.path === undefined && details.counterexamplePath)
        keepRegression(details.seed, details.counterexamplePath, String(details.errorInstance));
      throw new Error(await fc.asyncDefaultReportMessage(details));
    }
    console.info(`engine races: ${describeStats(stats)}, in ${Math.round(performance.now() - started)} ms`);
    if (parameters.path !== undefined) return; // one replayed run: the coverage figures below are for the exploration
    // The exploration reached the cases that matter, not only quiet runs.
    expect(stats.withCrash).toBeGreaterThan(stats.runs / 10);
    expect(stats.withEffect).toBeGreaterThan(stats.runs / 4);
    for (const reached of [
      stats.withOneRequestCommit,
      stats.withKeys,
      stats.withExpiry,
      stats.withOperatorDecision,
      stats.withRememberedKey,
    ]) {
      expect(reached).toBeGreaterThan(stats.runs / 50);
    }
  });

  it('keeps every invariant when requests land after their caller gave up', { timeout: 120_000 }, async () => {
    const stats = newStats();
    const started = performance.now();
    const parameters = runParameters(LATE_RUNS);
    const details = await fc.check(raceProperty(REAL, LATE_LANDINGS, stats), parameters);
    if (details.failed) throw new Error(await fc.asyncDefaultReportMessage(details));
    console.info(`engine races, late landings: ${describeStats(stats)}, in ${Math.round(performance.now() - started)} ms`);
    if (parameters.path !== undefined) return;
    // Requests did land late: after their caller's deadline inside the window, and (dedup) after the window.
    expect(stats.withLandingAfterDeadline).toBeGreaterThan(stats.runs / 20);
    expect(stats.withLandingAfterWindow).toBeGreaterThan(stats.runs / 200);
  });

  it.each(regressions())('regression: $name (FC_SEED=$seed FC_PATH=$path)', { timeout: 30_000 }, async ({ seed, path }) => {
    await fc.assert(raceProperty(REAL, EXPLORED, newStats()), { seed, path, numRuns: 1, endOnFailure: true });
  });
});
