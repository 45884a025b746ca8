/**
 * Runs spin on the models of this folder: `spin -a` with the given defines, `gcc -O2` (with -DSAFETY for the
 * invariants, or the weak-fairness build for progress), `./pan`; reads back the errors and the states explored, and
 * replays the trail of a failure as one line per step (store writes, effects, answers, crashes, lease expiries).
 * `npx tsx proof/spin.ts` runs every check (CLEAN, LIVENESS, the planted bugs, FINDINGS) and prints a table.
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
  /** With `liveness`: look for cycles only, ignoring assertions (`pan -A`), to show the progress check on its own. */
  cyclesOnly?: boolean;
  /** Breadth-first search: the shortest counterexample (safety only). */
  shortest?: boolean;
  /** The search depth bound (`pan -m`); a search that reaches it is incomplete. */
  depth?: number;
}

export interface SpinResult {
  errors: number;
  states: number;
  seconds: number;
  /** The failing assertion or claim, when there is one. */
  failure?: string;
  /**
   * Why the search did not cover every state, when it did not: it reached the depth bound or the memory bound, or
   * the model's own bound (an assertion of MODEL_BOUNDS). Such a run proves nothing and is never a pass.
   */
  incomplete?: string;
  /** The invariant the failure breaks, in words (undefined for a failure that is not one of INVARIANTS). */
  invariant?: string;
  /** The counterexample, one step a line. */
  trail: string[];
  output: string;
}

/** The invariants, by the text of the assertion that checks them (docs/correctness.md, "Invariants"). */
const INVARIANTS: Array<[RegExp, string]> = [
  [/^assertion violated \(T\[.*\]!=6\)$/, 'no store transition outside the code\'s table'],
  [/^assertion violated \(eff_cnt\[\w+\]<=1\)$/, 'at most one effect per key'],
  [/^assertion violated \(eff_int\[.*\]<=1\)$/, 'at most one effect per intent'],
  [/^assertion violated \(eff_cnt\[k\]==0\)$/, 'no answer says nothing ran once an effect exists'],
  [/^assertion violated \(.*eff_mask.*\)$/, 'no succeeded answer without its effect'],
  [/^assertion violated \(res_fp\[.*\]==myfp\)$/, "a succeeded answer carries the result of the caller's own arguments"],
  [/^assertion violated \(succ_res\[k\]==.*\)$/, 'every succeeded answer for a key carries the same result'],
  [/^assertion violated \(applied<=1\)$/, 'each queued event takes effect once'],
  [/^invalid end state$/, 'no caller blocked for ever'],
  [/^acceptance cycle$/, 'progress: every intent ends with a final answer and nothing stays in progress for ever'],
];

/** Assertions that bound the model (not invariants): failing one says the bounds are too small, not that a check failed. */
const MODEL_BOUNDS = [/\(nres<16\)/];

/** The memory bound of one search, in MB: a search beyond it stops and is incomplete. */
const MEMLIM_MB = 3000;

const ANSWERS = ['none', 'succeeded', 'failed', 'conflict', 'review_required', 'unknown', 'in_progress', 'failed (retry, nothing ran)'];

interface Names {
  states: string[];
  events: string[];
}

/** The states' and events' names of the generated table, by number (ST_NONE: a move the table does not have). */
function tableNames(table: string): Names {
  const names = (prefix: string) => {
    const out: string[] = [];
    for (const m of table.matchAll(new RegExp(`#define ${prefix}_(\\w+) (\\d+)`, 'g'))) out[Number(m[2])] = m[1]!;
    return out;
  };
  return {
    states: names('ST').map((s) => (s === 'NONE' ? '(no such move in the table)' : s)),
    events: names('EV').map((e) => e.toLowerCase()),
  };
}

/** Names the numbers a TRAIL line of protocol.pml prints (events from the generated table). */
function describe(line: string, { states, events }: Names, procs: Map<string, string>): string {
  const [, pid, what, ...rest] = line.trim().split(/\s+/);
  const who = procs.get(pid!) ?? `proc ${pid}`;
  const n = rest.map(Number);
  switch (what) {
    case 'write':
      return `${who}: key ${n[0]} ${events[n[1]!] ?? n[1]}: ${states[n[2]!] ?? n[2]} -> ${states[n[3]!] ?? n[3]}`;
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

/** The processes of a model in the order init starts them (pids from 1), for naming a trail's steps. */
function processes(run: SpinRun): string[] {
  if (run.model === 'outbox.pml') return ['writer', 'relay', 'clock', 'consumer 0', 'consumer 1', 'crasher'];
  // protocol.pml starts the operator and the crasher only when their bound is not 0 (the model's defaults are 1).
  const bound = (name: string) => Number(run.defines[name] ?? 1) > 0;
  return [
    'caller 0 (args A)',
    'caller 1 (args A)',
    'caller 2 (args B)',
    'clock',
    'reconciler',
    ...(bound('OPS') ? ['operator'] : []),
    ...(bound('CRASHES') ? ['crasher'] : []),
  ];
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
    // The shortest counterexample: pan -i shortens the trail on each error it finds (BFS does not take hidden variables).
    const mode = run.liveness ? ['-DNFAIR=3'] : run.shortest ? ['-DSAFETY', '-DNOCLAIM', '-DREACH'] : ['-DSAFETY', '-DNOCLAIM'];
    sh('gcc', ['-w', '-O2', '-DCOLLAPSE', `-DMEMLIM=${MEMLIM_MB}`, ...mode, '-o', 'pan', 'pan.c']);
    const depth = run.depth ?? 200_000;
    const started = Date.now();
    let output: string;
    try {
      output = sh('./pan', [`-m${depth}`, ...(run.liveness ? ['-a', '-f'] : []), ...(run.cyclesOnly ? ['-A'] : []), ...(run.shortest ? ['-i'] : [])]);
    } catch (err) {
      output = String((err as { stdout?: string }).stdout ?? err);
    }
    const seconds = (Date.now() - started) / 1000;
    const errors = Number(/errors: (\d+)/.exec(output)?.[1] ?? NaN);
    const states = Number(/(\d+) states, stored/.exec(output)?.[1] ?? NaN);
    let failure = /pan:1: (.*?) \(at depth/.exec(output)?.[1];
    let trail: string[] = [];
    if (errors > 0) {
      const replay = sh('spin', ['-t', ...defs, run.model]);
      const procs = new Map(processes(run).map((name, i) => [String(i + 1), name]));
      const names = tableNames(sh('cat', ['generated/transitions.pml']));
      trail = replay
        .split('\n')
        .filter((l) => l.includes('TRAIL') || l.includes('Error') || l.includes('assertion') || l.includes('START OF CYCLE'))
        .map((l) => (l.includes('TRAIL') ? describe(l.slice(l.indexOf('TRAIL')), names, procs) : l.trim()));
      // The trail kept is the last (with -i the shortest) error found, not always the first pan reported.
      const replayed = /text of failed assertion: assert\((.*)\)\s*$/m.exec(replay)?.[1];
      if (replayed) failure = `assertion violated ${replayed.replace(/\s+/g, '')}`;
    }
    const incomplete = output.includes('max search depth too small')
      ? `the depth bound (${depth})`
      : /MEMLIM|out of memory/.test(output)
        ? `the memory bound (${MEMLIM_MB} MB)`
        : failure && MODEL_BOUNDS.some((b) => b.test(failure!))
          ? `the model's bound: ${failure}`
          : Number.isNaN(errors) || Number.isNaN(states)
            ? 'no result from pan'
            : undefined;
    const invariant = failure === undefined ? undefined : INVARIANTS.find(([text]) => text.test(failure!))?.[1];
    return { errors, states, seconds, failure, incomplete, invariant, trail, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Bound profiles of the protocol model for the invariants: each runs exhaustively in seconds. */
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
  { flag: 'PLANT_NO_FENCE', what: 'completion without the owner fence', run: { model: 'protocol.pml', defines: { KIND: 0, ...NONE, SLOW: 1, PLANT_NO_FENCE: true }, shortest: true } },
  { flag: 'PLANT_RELEASE_NOT_HELD', what: 'releasing a lock this call does not hold', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_RELEASE_NOT_HELD: true }, shortest: true } },
  { flag: 'PLANT_MUTATED_ARGS', what: 'completion keyed by arguments changed after the claim', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_MUTATED_ARGS: true }, shortest: true } },
  { flag: 'PLANT_NO_DEADLINE', what: 'an in-progress record without a deadline taken as orphaned', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_NO_DEADLINE: true }, shortest: true } },
  { flag: 'PLANT_RECONCILE_LIVE_LEASE', what: "the reconciler settling `absent` while the first call's lease still runs", run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_RECONCILE_LIVE_LEASE: true }, shortest: true } },
  { flag: 'PLANT_NO_CONSUMER_DEDUP', what: 'a consumer without dedup', run: { model: 'outbox.pml', defines: { PLANT_NO_CONSUMER_DEDUP: true }, shortest: true } },
  { flag: 'PLANT_NEW_KEY_ON_UNKNOWN', what: 'a client that retries `unknown` with a new key', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, FAULTS: 1, PLANT_NEW_KEY_ON_UNKNOWN: true }, shortest: true } },
];

/** What the model found in the engine as it is on main (docs/correctness.md, "Findings"): each flag restores it. */
export const FINDINGS: Array<{ flag: string; what: string; run: SpinRun }> = [
  { flag: 'FINDING_REPLAY_OTHER_ARGS', what: 'a fenced-out executor answers the result of other arguments', run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, SLOW: 1, FINDING_REPLAY_OTHER_ARGS: true }, shortest: true } },
  { flag: 'FINDING_RELEASE_AFTER_TAKEOVER', what: 'a taken-over execution that fails transiently releases the key', run: { model: 'protocol.pml', defines: { KIND: 0, ...NONE, CRASHES: 1, SLOW: 1, FINDING_RELEASE_AFTER_TAKEOVER: true }, shortest: true } },
];

/** The runs that must pass on main. */
export const CLEAN: Array<{ name: string; run: SpinRun }> = [
  ...Object.entries(KINDS).flatMap(([kind, KIND]) =>
    Object.entries(PROFILES).map(([profile, bounds]) => ({ name: `protocol ${kind} ${profile}`, run: { model: 'protocol.pml' as const, defines: { KIND, ...bounds } } })),
  ),
  { name: 'outbox', run: { model: 'outbox.pml', defines: {} } },
];

/**
 * Bound profiles for progress under weak fairness (`pan -a -f`), one bound each: the fairness search costs about ten
 * times the safety one (a crash and a fault together take minutes). Every intent ends with a final answer (or a
 * record parked for a person) and no record stays PROCESSING or UNKNOWN, in every fair run with that one bound.
 * Without a crash, a fault or a slow executor no record is ever UNKNOWN, so the operator has nothing to settle: its
 * decisions and the end of retention stay with the safety profiles.
 */
export const PROGRESS_PROFILES = {
  crash: { CRASHES: 1, FAULTS: 0, SLOW: 0, OPS: 0, EXPIRES: 0 },
  fault: { CRASHES: 0, FAULTS: 1, SLOW: 0, OPS: 0, EXPIRES: 0 },
  slow: { CRASHES: 0, FAULTS: 0, SLOW: 1, OPS: 0, EXPIRES: 0 },
} as const;

/** Progress under weak fairness: every tool kind with every progress profile, and the outbox. */
export const LIVENESS: Array<{ name: string; run: SpinRun }> = [
  ...Object.entries(KINDS).flatMap(([kind, KIND]) =>
    Object.entries(PROGRESS_PROFILES).map(([profile, bounds]) => ({
      name: `protocol ${kind} progress ${profile}`,
      run: { model: 'protocol.pml' as const, defines: { KIND, ...bounds }, liveness: true },
    })),
  ),
  { name: 'outbox progress', run: { model: 'outbox.pml', defines: {}, liveness: true } },
];

/**
 * The progress check on its own catches a livelock: with the in-progress record taken as orphaned, two callers take
 * the key from each other for ever. Assertions are ignored (`pan -A`) so the search looks for the cycle only.
 */
export const PLANTED_LIVELOCK: { flag: string; what: string; run: SpinRun } = {
  flag: 'PLANT_NO_DEADLINE',
  what: 'an in-progress record without a deadline taken as orphaned (progress only)',
  run: { model: 'protocol.pml', defines: { KIND: 1, ...NONE, PLANT_NO_DEADLINE: true }, liveness: true, cyclesOnly: true },
};

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const rows: Array<Record<string, unknown>> = [];
  const planted = [...PLANTED, { ...PLANTED_LIVELOCK, flag: `${PLANTED_LIVELOCK.flag} (progress)` }, ...FINDINGS];
  for (const { name, run } of [...CLEAN, ...LIVENESS, ...planted.map((p) => ({ name: p.flag, run: p.run }))]) {
    const r = runSpin(run);
    rows.push({ check: name, errors: r.errors, states: r.states, seconds: r.seconds, broken: r.invariant ?? r.failure ?? '', incomplete: r.incomplete ?? '' });
    if (r.errors && process.argv.includes('--trails')) console.log(`\n${name}\n  ${r.trail.join('\n  ')}`);
  }
  console.table(rows);
}
