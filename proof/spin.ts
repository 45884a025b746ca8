/**
 * Runs spin on the models of this folder: `spin -a` with the given defines, `gcc -O2` (with -DSAFETY for the
 * invariants, or the weak-fairness build for progress), `./pan`; reads back the errors and the states explored, and
 * replays the trail of a failure as one line per step (store writes, effects, answers, crashes, lease expiries).
 * `npx tsx proof/spin.ts` runs every check of `CHECKS` (what `test/proof/` asserts) and prints a table.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROOF_DIR = fileURLToPath(new URL('.', import.meta.url));

export interface SpinRun {
  model: 'protocol.pml' | 'outbox.pml';
  /** Preprocessor defines, e.g. { KIND: 1, CRASHES: 1, PLANT_NO_FENCE: true }. */
  defines: Record<string, number | boolean>;
  /** Check the `progress` LTL property under weak fairness instead of the invariants. */
  liveness?: boolean;
}

export interface SpinResult {
  errors: number;
  states: number;
  seconds: number;
  /** The failing assertion or claim, when there is one. */
  failure?: string;
  /** The counterexample, one step a line. */
  trail: string[];
  output: string;
}

const STATES = ['ABSENT', 'PROCESSING', 'UNKNOWN', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW'];
const ANSWERS = ['none', 'succeeded', 'failed', 'conflict', 'review_required', 'unknown', 'in_progress', 'failed (retry, nothing ran)'];

/** Names the numbers a TRAIL line of protocol.pml prints (events from the generated table). */
function describe(line: string, events: string[], procs: Map<string, string>): string {
  const [, pid, what, ...rest] = line.trim().split(/\s+/);
  const who = procs.get(pid!) ?? `proc ${pid}`;
  const n = rest.map(Number);
  switch (what) {
    case 'write':
      return `${who}: key ${n[0]} ${events[n[1]!] ?? n[1]} -> ${STATES[n[2]!] ?? n[2]}`;
    case 'effect':
      return rest.length ? `${who}: downstream effect on key ${n[0]}, result r${n[1]}` : `${who}: effect`;
    case 'answer':
      return `${who}: answers ${ANSWERS[n[1]!] ?? n[1]} (key ${n[0]})`;
    case 'commit_once':
      return `${who}: one-request commit on key ${n[0]}`;
    default:
      return `${who}: ${[what, ...rest].join(' ')}`;
  }
}

export function runSpin(run: SpinRun): SpinResult {
  const dir = mkdtempSync(join(tmpdir(), 'spin-'));
  try {
    cpSync(PROOF_DIR, dir, { recursive: true, filter: (src) => !src.endsWith('.ts') });
    const defs = Object.entries(run.defines)
      .filter(([, v]) => v !== false)
      .map(([k, v]) => (v === true ? `-D${k}` : `-D${k}=${v}`));
    const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { cwd: dir, encoding: 'utf8', maxBuffer: 64 << 20 });
    sh('spin', ['-a', ...defs, run.model]);
    const gcc = run.liveness ? ['-DNFAIR=3'] : ['-DSAFETY', '-DNOCLAIM'];
    sh('gcc', ['-w', '-O2', '-DCOLLAPSE', ...gcc, '-o', 'pan', 'pan.c']);
    const started = Date.now();
    let output: string;
    try {
      output = sh('./pan', run.liveness ? ['-m200000', '-a', '-f'] : ['-m200000']);
    } catch (err) {
      output = String((err as { stdout?: string }).stdout ?? err);
    }
    const seconds = (Date.now() - started) / 1000;
    const errors = Number(/errors: (\d+)/.exec(output)?.[1] ?? NaN);
    const states = Number(/(\d+) states, stored/.exec(output)?.[1] ?? NaN);
    const failure = /pan:1: (.*?) \(at depth/.exec(output)?.[1];
    let trail: string[] = [];
    if (errors > 0) {
      const replay = sh('spin', ['-t', ...defs, run.model]);
      const procs = new Map<string, string>();
      const events = [...sh('cat', ['generated/transitions.pml']).matchAll(/#define EV_(\w+) \d+/g)].map((m) => m[1]!.toLowerCase());
      // The processes, in the order init starts them (pids from 1).
      const starts = run.model === 'protocol.pml' ? ['caller 0 (args A)', 'caller 1 (args A)', 'caller 2 (args B)', 'clock', 'reconciler', 'operator', 'crasher'] : ['writer', 'relay', 'clock', 'consumer 0', 'consumer 1', 'crasher'];
      starts.forEach((name, i) => procs.set(String(i + 1), name));
      trail = replay
        .split('\n')
        .filter((l) => l.includes('TRAIL') || l.includes('Error') || l.includes('assertion'))
        .map((l) => (l.includes('TRAIL') ? describe(l.slice(l.indexOf('TRAIL')), events, procs) : l.trim()));
    }
    return { errors, states, seconds, failure, trail, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Bound profiles of the protocol model: each small enough to run exhaustively in well under a minute. */
export const PROFILES = {
  /** A crash of any caller at any step, and one fault (downstream, store or a lost answer). */
  crash_fault: { CRASHES: 1, FAULTS: 1, SLOW: 0, OPS: 0, EXPIRES: 0 },
  /** A lease that passes while its executor lives, and one fault. */
  slow_fault: { CRASHES: 0, FAULTS: 1, SLOW: 1, OPS: 0, EXPIRES: 0 },
  /** A crash and a lease that passes while its executor lives. */
  crash_slow: { CRASHES: 1, FAULTS: 0, SLOW: 1, OPS: 0, EXPIRES: 0 },
  /** The operator's settle and the end of retention, with a slow executor. */
  operator_retention: { CRASHES: 0, FAULTS: 0, SLOW: 1, OPS: 1, EXPIRES: 1 },
} as const;

/** Planted bugs need few of the bounds: each run below turns on only what its counterexample needs. */
const NONE = { CRASHES: 0, FAULTS: 0, SLOW: 0, OPS: 0, EXPIRES: 0 } as const;

export const KINDS = { dedup_downstream: 0, plain_downstream: 1, local_one_request: 2 } as const;

/** Each planted bug and the run that must catch it. */
export const PLANTED: Array<{ flag: string; what: string; run: SpinRun }> = [
  { flag: 'PLANT_NO_FENCE', what: 'completion without the owner fence', run: { model: 'protocol.pml', defines: { KIND: 0, ...NONE, SLOW: 1, PLANT_NO_FENCE: true } } },
  { flag: 'PLANT_RELEASE_NOT_HELD', what: 'releasing a lock this call does not hold', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_RELEASE_NOT_HELD: true } } },
  { flag: 'PLANT_MUTATED_ARGS', what: 'completion keyed by arguments changed after the claim', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_MUTATED_ARGS: true } } },
  { flag: 'PLANT_NO_DEADLINE', what: 'an in-progress record without a deadline taken as orphaned', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_NO_DEADLINE: true } } },
  { flag: 'PLANT_RECONCILE_LIVE_LEASE', what: "the reconciler settling `absent` while the first call's lease still runs", run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_RECONCILE_LIVE_LEASE: true } } },
  { flag: 'PLANT_NO_CONSUMER_DEDUP', what: 'a consumer without dedup', run: { model: 'outbox.pml', defines: { PLANT_NO_CONSUMER_DEDUP: true } } },
  { flag: 'PLANT_NEW_KEY_ON_UNKNOWN', what: 'a client that retries `unknown` with a new key', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, FAULTS: 1, PLANT_NEW_KEY_ON_UNKNOWN: true } } },
];

/** What the model found in the engine as it is on main (docs/correctness.md, "Findings"): each flag restores it. */
export const FINDINGS: Array<{ flag: string; what: string; run: SpinRun }> = [
  { flag: 'FINDING_REPLAY_OTHER_ARGS', what: 'a fenced-out executor answers the result of other arguments', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, SLOW: 1, FINDING_REPLAY_OTHER_ARGS: true } } },
  { flag: 'FINDING_RELEASE_AFTER_TAKEOVER', what: 'a taken-over execution that fails transiently releases the key', run: { model: 'protocol.pml', defines: { KIND: 0, ...NONE, CRASHES: 1, SLOW: 1, FINDING_RELEASE_AFTER_TAKEOVER: true } } },
];

/** The runs that must pass on main. */
export const CLEAN: Array<{ name: string; run: SpinRun }> = [
  ...Object.entries(KINDS).flatMap(([kind, KIND]) =>
    Object.entries(PROFILES).map(([profile, bounds]) => ({ name: `protocol ${kind} ${profile}`, run: { model: 'protocol.pml' as const, defines: { KIND, ...bounds } } })),
  ),
  { name: 'outbox', run: { model: 'outbox.pml', defines: {} } },
];

/** Progress under weak fairness (smaller bounds: the fairness search costs several times the safety one). */
export const LIVENESS: Array<{ name: string; run: SpinRun }> = [
  ...Object.entries(KINDS).map(([kind, KIND]) => ({
    name: `protocol ${kind} progress`,
    run: { model: 'protocol.pml' as const, defines: { KIND, CRASHES: 1, FAULTS: 0, SLOW: 0, OPS: 0, EXPIRES: 0 }, liveness: true },
  })),
  { name: 'outbox progress', run: { model: 'outbox.pml', defines: {}, liveness: true } },
];

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const rows: Array<Record<string, unknown>> = [];
  for (const { name, run } of [...CLEAN, ...LIVENESS, ...PLANTED.map((p) => ({ name: p.flag, run: p.run })), ...FINDINGS.map((p) => ({ name: p.flag, run: p.run }))]) {
    const r = runSpin(run);
    rows.push({ check: name, errors: r.errors, states: r.states, seconds: r.seconds, failure: r.failure ?? '' });
    if (r.errors && process.argv.includes('--trails')) console.log(`\n${name}\n  ${r.trail.join('\n  ')}`);
  }
  console.table(rows);
}
