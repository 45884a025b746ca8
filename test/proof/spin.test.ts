import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileFor, compileStats, runSpin, type SpinRun } from '../models/spin';
import { CLEAN, FINDINGS, KINDS, LIVENESS, PLANTED, PLANTED_LIVELOCK } from '../models/spin-runs';

/**
 * The model checks on main pass, exhaustively (a search cut short by a bound fails), and every planted bug fails
 * them with a trail. Every safety profile runs here; progress under weak fairness costs about ten times more, so
 * here one progress profile per tool kind, and every one with `npx tsx test/models/spin.ts`. Each model compiles once per
 * search mode (every profile and planted bug is a run-time parameter; a binary compiled by an earlier run from the
 * same source is reused), and the searches run in parallel.
 */
const missing = ['spin', 'gcc'].filter((tool) => {
  try {
    execFileSync(tool, [tool === 'spin' ? '-V' : '--version']);
    return false;
  } catch {
    return true;
  }
});

const PROGRESS_HERE = [
  'outbox progress',
  `protocol dedup_downstream progress slow`,
  `protocol plain_downstream progress crash`,
  `protocol local_one_request progress fault`,
];

/**
 * The longest searches first (vitest starts five concurrent tests at a time, in this order): the outbox's progress
 * search takes several times any other, and started last it would run on alone at the end.
 */
const MAIN: Array<{ name: string; run: SpinRun }> = [...PROGRESS_HERE.map((name) => LIVENESS.find((l) => l.name === name)!), ...CLEAN];
const ALL_RUNS = [...MAIN.map((m) => m.run), ...PLANTED.map((p) => p.run), ...FINDINGS.map((f) => f.run), PLANTED_LIVELOCK.run];

/** The planted bugs of the in-flight window: the counterexample has a request that lands after its caller gave up. */
const WINDOW_PLANTS = ['PLANT_ABSENT_IN_WINDOW', 'PLANT_TAKEOVER_IN_WINDOW', 'PLANT_VERIFY_IN_WINDOW'];

it('spin and gcc are installed (the model checks need them: `apt-get install spin gcc`)', () => {
  expect(missing, `missing ${missing.join(' and ')}: install with \`apt-get install spin gcc\``).toEqual([]);
});

describe.skipIf(missing.length > 0).concurrent('spin', () => {
  beforeAll(async () => {
    await compileFor(ALL_RUNS);
  }, 600_000);

  it('compiles each model once per search mode, whatever the profiles and planted bugs', () => {
    // protocol.pml and outbox.pml, each for the invariants, the shortest trail and progress: six binaries, each
    // compiled once or taken from an earlier run's cache (node_modules/.cache/spin).
    expect(compileStats.spin).toBe(2);
    expect(compileStats.gcc + compileStats.cached).toBe(6);
  });

  it('runs one progress profile per tool kind', () => {
    expect(MAIN.filter((m) => m.run.liveness && m.run.model === 'protocol.pml')).toHaveLength(Object.keys(KINDS).length);
  });

  it('refuses a parameter the model does not have', async () => {
    await expect(runSpin({ model: 'outbox.pml', params: { KIND: 1 } })).rejects.toThrow(/outbox.pml has no run-time parameter KIND/);
  });

  for (const { name, run } of MAIN) {
    it(`${name}${run.liveness ? ' (weak fairness)' : ''}: no error, every state explored`, async () => {
      const result = await runSpin(run);
      expect(result.errors, result.trail.join('\n')).toBe(0);
      expect(result.incomplete).toBeUndefined();
      expect(result.states).toBeGreaterThan(1000);
    }, 1_200_000);
  }

  it('a search cut short by its depth bound is reported incomplete, not passed', async () => {
    const result = await runSpin({ model: 'outbox.pml', params: {}, depth: 20 });
    expect(result.errors).toBe(0);
    expect(result.incomplete).toMatch(/depth bound/);
  }, 1_200_000);

  for (const plant of [...PLANTED, ...FINDINGS]) {
    it(`${plant.flag} (${plant.what}) breaks an invariant, with a trail`, async () => {
      const result = await runSpin(plant.run);
      expect(result.errors).toBeGreaterThan(0);
      expect(result.incomplete, result.failure).toBeUndefined();
      expect(result.failure).toMatch(/assertion violated/);
      expect(result.invariant, result.failure).toBeDefined();
      expect(result.trail.length).toBeGreaterThan(1);
      if (WINDOW_PLANTS.includes(plant.flag)) expect(result.trail.join('\n')).toMatch(/left on the wire/);
    }, 1_200_000);
  }

  it(`${PLANTED_LIVELOCK.flag}: the progress check alone finds the livelock`, async () => {
    const result = await runSpin(PLANTED_LIVELOCK.run);
    expect(result.errors).toBeGreaterThan(0);
    expect(result.failure).toBe('acceptance cycle');
    expect(result.incomplete).toBeUndefined();
    expect(result.trail).toContain('<<<<<START OF CYCLE>>>>>');
  }, 1_200_000);
});
