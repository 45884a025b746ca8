import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { FINDINGS, KINDS, PLANTED, PROFILES, runSpin, type SpinRun } from '../../proof/spin';

/**
 * The model checks on main pass and every planted bug fails them. The full matrix of bounds (every tool kind with
 * every profile) is `npx tsx proof/spin.ts`; here one profile per kind keeps the file within a few minutes.
 */
const hasSpin = (() => {
  try {
    execFileSync('spin', ['-V']);
    execFileSync('gcc', ['--version']);
    return true;
  } catch {
    return false;
  }
})();

const MAIN: Array<[string, SpinRun]> = [
  ['protocol, downstream that dedups, slow executor + fault', { model: 'protocol.pml', defines: { KIND: KINDS.dedup_downstream, ...PROFILES.slow_fault } }],
  ['protocol, downstream that does not dedup, crash + fault', { model: 'protocol.pml', defines: { KIND: KINDS.plain_downstream, ...PROFILES.crash_fault } }],
  ['protocol, local tool on the one-request path, operator + retention', { model: 'protocol.pml', defines: { KIND: KINDS.local_one_request, ...PROFILES.operator_retention } }],
  ['outbox relay and consumers', { model: 'outbox.pml', defines: {} }],
  ['outbox progress under weak fairness', { model: 'outbox.pml', defines: {}, liveness: true }],
];

describe.skipIf(!hasSpin)('spin: the protocol model on main', () => {
  for (const [name, run] of MAIN) {
    it(`${name}: no error`, () => {
      const result = runSpin(run);
      expect(result.errors, result.trail.join('\n')).toBe(0);
      expect(result.states).toBeGreaterThan(1000);
    }, 600_000);
  }
});

describe.skipIf(!hasSpin)('spin: planted bugs are caught', () => {
  for (const plant of [...PLANTED, ...FINDINGS]) {
    it(`${plant.flag} (${plant.what}) fails the check with a trail`, () => {
      const result = runSpin(plant.run);
      expect(result.errors).toBeGreaterThan(0);
      expect(result.failure).toMatch(/assertion violated/);
      expect(result.trail.length).toBeGreaterThan(1);
    }, 600_000);
  }
});
