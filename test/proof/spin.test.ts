import { describe, expect, it } from 'vitest';
import { CLEAN, FINDINGS, KINDS, LIVENESS, PLANTED, PLANTED_LIVELOCK, runSpin, type SpinRun } from '../../proof/spin';
import { requireSystemTools } from '../support/prerequisites';

/**
 * The model checks on main pass, exhaustively (a search cut short by a bound fails), and every planted bug fails
 * them with a trail. Every safety profile runs here (seconds each); progress under weak fairness costs about ten
 * times more, so here one progress profile per tool kind, and every one with `npx tsx proof/spin.ts`.
 */
requireSystemTools('spin', 'gcc');

const PROGRESS_HERE = [
  `protocol dedup_downstream progress slow`,
  `protocol plain_downstream progress crash`,
  `protocol local_one_request progress fault`,
  'outbox progress',
];

const MAIN: Array<{ name: string; run: SpinRun }> = [...CLEAN, ...LIVENESS.filter((l) => PROGRESS_HERE.includes(l.name))];

describe('spin: the models on main', () => {
  it('runs one progress profile per tool kind', () => {
    expect(MAIN.filter((m) => m.run.liveness && m.run.model === 'protocol.pml')).toHaveLength(Object.keys(KINDS).length);
  });

  for (const { name, run } of MAIN) {
    it(`${name}${run.liveness ? ' (weak fairness)' : ''}: no error, every state explored`, () => {
      const result = runSpin(run);
      expect(result.errors, result.trail.join('\n')).toBe(0);
      expect(result.incomplete).toBeUndefined();
      expect(result.states).toBeGreaterThan(1000);
    }, 600_000);
  }

  it('a search cut short by its depth bound is reported incomplete, not passed', () => {
    const result = runSpin({ model: 'outbox.pml', defines: {}, depth: 20 });
    expect(result.errors).toBe(0);
    expect(result.incomplete).toMatch(/depth bound/);
  }, 600_000);
});

describe('spin: planted bugs are caught', () => {
  for (const plant of [...PLANTED, ...FINDINGS]) {
    it(`${plant.flag} (${plant.what}) breaks an invariant, with a trail`, () => {
      const result = runSpin(plant.run);
      expect(result.errors).toBeGreaterThan(0);
      expect(result.incomplete, result.failure).toBeUndefined();
      expect(result.failure).toMatch(/assertion violated/);
      expect(result.invariant, result.failure).toBeDefined();
      expect(result.trail.length).toBeGreaterThan(1);
    }, 600_000);
  }

  it(`${PLANTED_LIVELOCK.flag}: the progress check alone finds the livelock`, () => {
    const result = runSpin(PLANTED_LIVELOCK.run);
    expect(result.errors).toBeGreaterThan(0);
    expect(result.failure).toBe('acceptance cycle');
    expect(result.incomplete).toBeUndefined();
    expect(result.trail).toContain('<<<<<START OF CYCLE>>>>>');
  }, 600_000);
});
