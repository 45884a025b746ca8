/**
 * Runs spin on the models of this folder. Each model is compiled once per search mode (`spin -a`, then `gcc`: the
 * invariants, the invariants with the shortest trail, progress under weak fairness), and every profile, tool kind
 * and planted bug is a run-time parameter of that one `pan` (SPIN_<NAME> in its environment, read by the model's
 * init), so a whole run compiles six binaries, in parallel, each once, and none a binary an earlier run on this
 * machine compiled from the same `pan.c` and flags (kept in node_modules/.cache/spin). `runSpin` reads back the errors and the states
 * explored, and replays the trail of a failure (`pan -r`) as one line per step (store writes, effects, answers,
 * requests left on the wire, crashes, lease expiries). `npx tsx test/models/spin.ts` runs every check of spin-runs.ts (CLEAN, LIVENESS, the
 * planted bugs, FINDINGS) and prints a table.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { CLEAN, FINDINGS, LIVENESS, PLANTED, PLANTED_LIVELOCK } from './spin-runs';

const PROOF_DIR = fileURLToPath(new URL('.', import.meta.url));

export interface SpinRun {
  model: 'protocol.pml' | 'outbox.pml';
  /** Run-time parameters of the model (its `hidden` globals read at init), e.g. { KIND: 1, CRASHES: 1, PLANT_NO_FENCE: true }. */
  params: Record<string, number | boolean>;
  /** Check the `progress` LTL property under weak fairness instead of the invariants. */
  liveness?: boolean;
  /** With `liveness`: look for cycles only, ignoring assertions (`pan -A`), to show the progress check on its own. */
  cyclesOnly?: boolean;
  /** The shortest counterexample (safety only): `-DREACH` and `pan -i`. */
  shortest?: boolean;
  /** The search depth bound (`pan -m`); a search that reaches it is incomplete. */
  depth?: number;
}

export interface SpinResult {
  errors: number;
  states: number;
  /** The deepest step of the search. */
  depth: number;
  seconds: number;
  /** CPU seconds (user + system) of the search itself (pan), the trail's replay not included. */
  cpu: number;
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
  [/^assertion violated \(T\[.*\]!=6\)$/, "no store transition outside the code's table"],
  [/^assertion violated \(eff_cnt\[.*\]<=1\)$/, 'at most one effect per key'],
  [/^assertion violated \(rec\[.*\]\.st!=\d+\)$/, 'a record that says the operation failed has no effect'],
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

/**
 * The hash table of one search: 2^21 slots (16 MB). pan's default, 2^24 slots (128 MB), is cleared at every start,
 * about 0.4 s of CPU that a search of tens of thousands of states (every planted bug) spends on nothing; the largest
 * search here stores about half a million states, so 2^21 slots keep its chains short. A larger search is no less
 * exhaustive, only slower.
 */
const HASH_BITS = 21;

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
    case 'on_the_wire':
      return `${who}: request sent${rest.length ? ` on key ${n[0]}` : ''}, left on the wire (it may land later)`;
    case 'deduplicated':
      return `${who}: a request on key ${n[0]} lands, deduplicated (no effect)`;
    case 'window_passed':
      return `${who}: the in-flight window passes${rest.length ? ` on key ${n[0]}` : ''} (what is on the wire never lands)`;
    case 'forgets':
      return `${who}: the downstream forgets key ${n[0]} (dedup and lookup)`;
    case 'commit_once':
      return `${who}: one-request commit on key ${n[0]}`;
    default:
      return `${who}: ${[what, ...rest].join(' ')}`;
  }
}

/** The processes of a model in the order init starts them (pids from 1), for naming a trail's steps. */
function processes(run: SpinRun): string[] {
  if (run.model === 'outbox.pml') return ['writer', 'relay', 'clock', 'consumer 0', 'consumer 1', 'crasher', 'wire'];
  // protocol.pml starts the operator and the crasher only when their bound is not 0 (the model's defaults are 1).
  const bound = (name: string) => Number(run.params[name] ?? 1) > 0;
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

type Mode = 'safety' | 'shortest' | 'progress';
const MODE_FLAGS: Record<Mode, string[]> = {
  safety: ['-DSAFETY', '-DNOCLAIM'],
  // pan -i shortens the trail on each error it finds (BFS does not take hidden variables).
  shortest: ['-DSAFETY', '-DNOCLAIM', '-DREACH'],
  progress: ['-DNFAIR=3'],
};

/** How many spin, gcc and pan processes run at once (SPIN_JOBS, default the machine's cores). */
const JOBS = Math.max(1, Number(process.env.SPIN_JOBS) || availableParallelism());
let running = 0;
const waiting: Array<() => void> = [];
async function limited<T>(work: () => Promise<T>): Promise<T> {
  if (running >= JOBS) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/**
 * Runs a command and reports its CPU time (user + system): the shell's `times` after it prints what its children
 * used, the only per-process figure that a shared machine's load does not stretch.
 */
function exec(
  cmd: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<{ stdout: string; failed: boolean; cpu: number }> {
  const script = '"$0" "$@"; s=$?; times >&2; exit $s';
  return new Promise((resolve, reject) =>
    execFile('sh', ['-c', script, cmd, ...args], { ...options, encoding: 'utf8', maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      // pan exits non-zero when it finds an error: its report is still on stdout.
      if (err && !stdout) reject(new Error(`${cmd} ${args.join(' ')} failed: ${stderr || err.message}`));
      else {
        // `times`: the shell's own user and system time, then its children's, each as <minutes>m<seconds>s.
        const children = stderr.trim().split('\n').at(-1) ?? '';
        const cpu = [...children.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, m) => sum + Number(m[1]) * 60 + Number(m[2]), 0);
        resolve({ stdout, failed: Boolean(err), cpu });
      }
    }),
  );
}

/** Where this process keeps what it compiled; removed when it exits. */
let buildRoot: string | undefined;
function buildDir(): string {
  if (!buildRoot) {
    const root = mkdtempSync(join(tmpdir(), 'spin-build-'));
    process.once('exit', () => rmSync(root, { recursive: true, force: true }));
    buildRoot = root;
  }
  return buildRoot;
}

/**
 * Counts of what this process did, for the docs' figures and the test's check that nothing compiles twice: `spin -a`
 * runs, `gcc` runs, and binaries taken from the cache instead of a `gcc`.
 */
export const compileStats = {
  spin: 0,
  gcc: 0,
  cached: 0,
  compiles: [] as Array<{ model: SpinRun['model']; mode: Mode; flags: string; cpu: number }>,
};

const generated = new Map<string, Promise<{ dir: string; panC: string }>>();
const compiled = new Map<string, Promise<string>>();

/** `spin -a` of a model, once per process. */
function generate(model: SpinRun['model']): Promise<{ dir: string; panC: string }> {
  let done = generated.get(model);
  if (!done) {
    done = limited(async () => {
      const dir = mkdtempSync(join(buildDir(), `${model}-`));
      cpSync(PROOF_DIR, dir, { recursive: true, filter: (src) => !src.endsWith('.ts') });
      compileStats.spin++;
      await exec('spin', ['-a', model], { cwd: dir });
      return { dir, panC: readFileSync(join(dir, 'pan.c'), 'utf8') + readFileSync(join(dir, 'pan.h'), 'utf8') };
    });
    generated.set(model, done);
  }
  return done;
}

/**
 * gcc's optimisation per model and search mode, measured (docs/correctness.md, "Run time of the model checks"):
 * `-O1` where the searches' CPU saved is more than the compile's CPU added, so that even a fresh clone, which compiles
 * every binary, gains (the protocol's invariants, whose searches are most of the test's; the outbox's progress, the
 * one long search); `-O0` where the searches take a second or two in all.
 */
const OPTIMISED: ReadonlyArray<`${SpinRun['model']} ${Mode}`> = ['protocol.pml safety', 'outbox.pml progress'];
function gccFlags(model: SpinRun['model'], mode: Mode): string[] {
  return ['-w', OPTIMISED.includes(`${model} ${mode}`) ? '-O1' : '-O0', '-DCOLLAPSE', `-DMEMLIM=${MEMLIM_MB}`, ...MODE_FLAGS[mode]];
}

/** Compiled binaries kept between runs, by the hash of what made them (a fresh clone has none). */
const CACHE_DIR = join(PROOF_DIR, '..', 'node_modules', '.cache', 'spin');
let gccVersion: Promise<string> | undefined;

/** The pan binary of a model and mode; identical sources with identical flags compile once (per machine, cached). */
export async function panFor(model: SpinRun['model'], mode: Mode): Promise<string> {
  const { dir, panC } = await generate(model);
  const flags = gccFlags(model, mode);
  gccVersion ??= exec('gcc', ['-dumpfullversion', '-dumpmachine'], { cwd: dir }).then((r) => r.stdout);
  const key = createHash('sha256')
    .update(panC)
    .update(flags.join(' '))
    .update(await gccVersion)
    .digest('hex')
    .slice(0, 16);
  let done = compiled.get(key);
  if (!done) {
    done = limited(async () => {
      const cached = join(CACHE_DIR, `pan-${key}`);
      if (existsSync(cached)) {
        compileStats.cached++;
        return cached;
      }
      compileStats.gcc++;
      const { cpu } = await exec('gcc', [...flags, '-o', `pan-${key}`, 'pan.c'], { cwd: dir });
      compileStats.compiles.push({ model, mode, flags: flags.join(' '), cpu });
      // Into the cache by a rename, so another run never sees a binary half written.
      try {
        mkdirSync(CACHE_DIR, { recursive: true });
        const part = `${cached}.${process.pid}`;
        cpSync(join(dir, `pan-${key}`), part);
        chmodSync(part, 0o755);
        renameSync(part, cached);
        return cached;
      } catch {
        return join(dir, `pan-${key}`);
      }
    });
    compiled.set(key, done);
  }
  return done;
}

/** Compiles every binary a list of runs needs, in parallel (each once). */
export async function compileFor(runs: SpinRun[]): Promise<void> {
  await Promise.all(runs.map((run) => panFor(run.model, modeOf(run))));
}

const modeOf = (run: SpinRun): Mode => (run.liveness ? 'progress' : run.shortest ? 'shortest' : 'safety');

/** The run-time parameters a model declares (its `hidden` globals); any other name is refused. */
function declaredParams(model: SpinRun['model']): Set<string> {
  const text = readFileSync(join(PROOF_DIR, model), 'utf8');
  const names = new Set<string>();
  for (const m of text.matchAll(/^hidden byte ([^;]+);/gm)) for (const name of m[1]!.split(',')) names.add(name.trim().split(/\s*=/)[0]!);
  return names;
}

export async function runSpin(run: SpinRun): Promise<SpinResult> {
  const known = declaredParams(run.model);
  const unknown = Object.keys(run.params).filter((name) => !known.has(name));
  if (unknown.length) throw new Error(`${run.model} has no run-time parameter ${unknown.join(', ')} (it has ${[...known].join(', ')})`);
  const env = { ...process.env };
  for (const [name, value] of Object.entries(run.params)) env[`SPIN_${name}`] = String(Number(value));
  const pan = await panFor(run.model, modeOf(run));
  return limited(async () => {
    // Each search in its own folder: pan writes its trail there, under the model's name.
    const dir = mkdtempSync(join(tmpdir(), 'spin-run-'));
    try {
      const depth = run.depth ?? 200_000;
      const started = Date.now();
      const args = [
        `-m${depth}`,
        `-w${HASH_BITS}`,
        ...(run.liveness ? ['-a', '-f'] : []),
        ...(run.cyclesOnly ? ['-A'] : []),
        ...(run.shortest ? ['-i'] : []),
      ];
      const { stdout: output, cpu } = await exec(pan, args, { cwd: dir, env });
      const seconds = (Date.now() - started) / 1000;
      const errors = Number(/errors: (\d+)/.exec(output)?.[1] ?? NaN);
      const states = Number(/(\d+) states, stored/.exec(output)?.[1] ?? NaN);
      const reached = Number(/depth reached (\d+)/.exec(output)?.[1] ?? NaN);
      let failure = /pan:1: (.*?) \(at depth/.exec(output)?.[1];
      let trail: string[] = [];
      if (errors > 0) {
        const { stdout: replay } = await exec(pan, ['-r'], { cwd: dir, env });
        const procs = new Map(processes(run).map((name, i) => [String(i + 1), name]));
        const names = tableNames(readFileSync(join(PROOF_DIR, 'generated/transitions.pml'), 'utf8'));
        trail = replay
          .split('\n')
          .filter((l) => l.startsWith('TRAIL') || /^pan:\d+: /.test(l) || l.includes('START OF CYCLE'))
          .map((l) => (l.startsWith('TRAIL') ? describe(l, names, procs) : l.trim()));
        // The trail kept is the last (with -i the shortest) error found, not always the first pan reported.
        const replayed = /^pan:\d+: (assertion violated .*?) \(at depth/m.exec(replay)?.[1];
        if (replayed) failure = replayed;
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
      return { errors, states, depth: reached, seconds, cpu, failure, incomplete, invariant, trail, output };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const planted = [...PLANTED, { ...PLANTED_LIVELOCK, flag: `${PLANTED_LIVELOCK.flag} (progress)` }, ...FINDINGS];
  const all = [...CLEAN, ...LIVENESS, ...planted.map((p) => ({ name: p.flag, run: p.run }))];
  const started = Date.now();
  const results = await Promise.all(all.map(async ({ name, run }) => ({ name, r: await runSpin(run) })));
  const rows = results.map(({ name, r }) => ({
    check: name,
    errors: r.errors,
    states: r.states,
    depth: r.depth,
    'cpu s': Number(r.cpu.toFixed(2)),
    broken: r.invariant ?? r.failure ?? '',
    incomplete: r.incomplete ?? '',
  }));
  if (process.argv.includes('--trails'))
    for (const { name, r } of results) if (r.errors) console.log(`\n${name}\n  ${r.trail.join('\n  ')}`);
  console.table(rows);
  // Where the CPU goes: each search (above) and each compile (a fresh clone compiles all six; a cached binary none).
  console.table(compileStats.compiles.map((c) => ({ compile: `${c.model} ${c.mode}`, flags: c.flags, 'cpu s': Number(c.cpu.toFixed(2)) })));
  const cpu = (xs: number[]) => xs.reduce((a, b) => a + b, 0).toFixed(1);
  console.log(
    `${all.length} searches (${cpu(results.map(({ r }) => r.cpu))} s CPU), ${compileStats.spin} spin -a, ${compileStats.gcc} gcc ` +
      `(${cpu(compileStats.compiles.map((c) => c.cpu))} s CPU), ${compileStats.cached} from the cache, ${((Date.now() - started) / 1000).toFixed(0)} s wall`,
  );
}
