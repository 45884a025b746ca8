import { mkdir, readFile, rm } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import type { Plugin } from 'esbuild';
import { startColdStartFixture } from './cold-start-fixture';
import { buildLambdaBundle } from './lambda-bundle';

/**
 * `npx tsx test/bench/cold-start-candidates.ts [runs] [set]`: the cold-start candidates of issue 31 measured side by side, each
 * against the floor built the same way (docs/benchmarks.md, "Cold start"). Not a section of `npm run bench`: it
 * builds up to six bundles and takes a few minutes; the section measures what ships. The sets are below (`SETS`);
 * the first (`first`):
 *
 * - `one file`: the bundles as the stack ships them (lib/bundling.ts, esbuild's `--outfile`).
 * - `split`: the same options with esbuild's code splitting, so every `import()` in the code becomes a chunk read
 *   when first used. In the AWS SDK that is its credential providers (SSO, INI, process, web identity, container
 *   and instance metadata) and their STS/SSO clients, which Lambda's environment credentials never reach.
 * - `no first-use parts`: an ablation, not shippable: the parts a first `create_order` does not use (the approval
 *   page, the Secrets Manager client, the ISO 4217 table) replaced by stubs, as loading them on first use would
 *   at best leave them out of what a cold start reads.
 *
 * Each variant's process is the section's (test/bench/cold-start-fixture.ts: import, `initialize`, a `create_order`),
 * the variants interleaved run by run; medians. `DYNAMODB_ENDPOINT` uses a running emulator (lambdas/local/dynamodb-local.ts).
 */
const RUNS = Math.max(1, Number(process.argv[2]) || 11);
const FLOOR_ENTRY = 'test/bench/cold-start-floor.ts';

/** The first-use parts, each replaced by a module whose exports throw when used (ablation only). */
const FIRST_USE_STUBS: Record<string, string> = {
  'node_modules/currency-codes/index.js': 'export const code = unused;',
  'node_modules/@aws-sdk/client-secrets-manager/dist-es/index.js':
    'export const SecretsManagerClient = unused, GetSecretValueCommand = unused;',
  'lambdas/http/approval-page.ts': 'export const createApprovalPage = unused;',
};
const withoutFirstUseParts: Plugin = {
  name: 'without-first-use-parts',
  setup(build) {
    build.onLoad({ filter: /\.(ts|js)$/ }, ({ path }) => {
      const stub = Object.keys(FIRST_USE_STUBS).find((file) => path.endsWith(file));
      return stub
        ? { contents: `const unused = () => { throw new Error('left out of this measurement'); };\n${FIRST_USE_STUBS[stub]}`, loader: 'js' }
        : undefined;
    });
  },
};

/** An ablation by text: `file`'s source with `from` replaced by `to` (throws if `from` is not there, so it cannot go stale). */
const editing = (name: string, file: string, from: string, to: string): Plugin => ({
  name,
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
      if (!path.endsWith(file)) return undefined;
      const source = await readFile(path, 'utf8');
      if (!source.includes(from)) throw new Error(`${file} no longer has ${JSON.stringify(from)}: update this candidate`);
      return { contents: source.replace(from, to), loader: 'ts' };
    });
  },
});
/** The verifier's prefetch without importing the keys it fetched (as before issue 31's third pass). */
const keysImportedByFirstRequest = editing(
  'keys-imported-by-first-request',
  'lambdas/auth/verifier.ts',
  'set.reload().then(() => importKeys(set))',
  'set.reload()',
);

interface Candidate {
  name: string;
  /** The floor variant it is compared with (built the same way). */
  floor: string;
  options: Parameters<typeof buildLambdaBundle>[1];
  /** Node's command line before the script (V8 flags a wrapper script could pass), and environment (NODE_OPTIONS). */
  nodeArgs?: string[];
  env?: NodeJS.ProcessEnv;
}
/**
 * The sets: `first` (the first and second passes: code splitting and the first-use parts) and `third` (the third
 * pass: V8's young generation sized for the start, by NODE_OPTIONS and by command line, and the key set's keys
 * imported during init).
 */
const SETS: Record<string, Candidate[]> = {
  first: [
    { name: 'floor, one file', floor: 'floor, one file', options: { entry: FLOOR_ENTRY } },
    { name: 'deployed, one file', floor: 'floor, one file', options: {} },
    { name: 'deployed, one file, no first-use parts', floor: 'floor, one file', options: { plugins: [withoutFirstUseParts] } },
    { name: 'floor, split', floor: 'floor, split', options: { entry: FLOOR_ENTRY, splitting: true } },
    { name: 'deployed, split', floor: 'floor, split', options: { splitting: true } },
    { name: 'deployed, split, no first-use parts', floor: 'floor, split', options: { splitting: true, plugins: [withoutFirstUseParts] } },
  ],
  // The first request of an environment initialised ahead of it (a pause between import and the first event):
  // the import ms then include the pause; compare the initialize ms (the first request, token verified).
  prepared: [
    { name: 'deployed, paused', floor: 'deployed, paused', options: {}, env: { COLD_START_PAUSE_MS: '300' } },
    {
      name: 'deployed, paused, keys imported by the first request',
      floor: 'deployed, paused',
      options: { plugins: [keysImportedByFirstRequest] },
      env: { COLD_START_PAUSE_MS: '300' },
    },
  ],
  third: [
    { name: 'floor', floor: 'floor', options: { entry: FLOOR_ENTRY } },
    { name: 'deployed', floor: 'floor', options: {} },
    { name: 'deployed, keys imported by the first request', floor: 'floor', options: { plugins: [keysImportedByFirstRequest] } },
    {
      name: 'deployed, NODE_OPTIONS=--max-semi-space-size=16',
      floor: 'floor',
      options: {},
      env: { NODE_OPTIONS: '--max-semi-space-size=16' },
    },
    { name: 'deployed, node --min-semi-space-size=16', floor: 'floor', options: {}, nodeArgs: ['--min-semi-space-size=16'] },
    {
      name: 'floor, node --min-semi-space-size=16',
      floor: 'floor',
      options: { entry: FLOOR_ENTRY },
      nodeArgs: ['--min-semi-space-size=16'],
    },
  ],
  format: [
    { name: 'floor', floor: 'floor', options: { entry: FLOOR_ENTRY } },
    { name: 'deployed', floor: 'floor', options: {} },
    { name: 'floor, CommonJS', floor: 'floor, CommonJS', options: { entry: FLOOR_ENTRY, format: 'cjs' } },
    { name: 'deployed, CommonJS', floor: 'floor, CommonJS', options: { format: 'cjs' } },
  ],
};
const SET = process.argv[3] ?? 'third';
const CANDIDATES = SETS[SET];
if (!CANDIDATES) throw new Error(`no candidate set ${SET}: one of ${Object.keys(SETS).join(', ')}`);
const WORK_DIR = resolve('.bench/cold-start-candidates', SET);

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

await rm(WORK_DIR, { recursive: true, force: true });
await mkdir(WORK_DIR, { recursive: true });
const built = await Promise.all(
  CANDIDATES.map((candidate, i) =>
    buildLambdaBundle(join(WORK_DIR, String(i), candidate.options?.format === 'cjs' ? 'index.cjs' : 'index.mjs'), candidate.options),
  ),
);
const fixture = await startColdStartFixture({ workDir: WORK_DIR });
const samples = CANDIDATES.map(() => ({ init: [] as number[], cpu: [] as number[], imported: [] as number[], initialize: [] as number[] }));
try {
  const runOne = (i: number) => fixture.run(built[i]!.file, CANDIDATES[i]!.nodeArgs, CANDIDATES[i]!.env);
  for (const i of built.keys()) await runOne(i);
  for (let run = 0; run < RUNS; run++) {
    for (const i of built.keys()) {
      const t = await runOne(i);
      samples[i]!.init.push(t.called - t.booted);
      samples[i]!.cpu.push(t.cpuMs - t.bootCpu);
      samples[i]!.imported.push(t.imported - t.booted);
      samples[i]!.initialize.push(t.initialized - t.imported);
    }
  }
} finally {
  await fixture.stop();
}

const figures = CANDIDATES.map((candidate, i) => ({
  name: candidate.name,
  kib_read_at_start: round(built[i]!.figures.bytes / 1024),
  init_ms: round(median(samples[i]!.init)),
  cpu_ms: round(median(samples[i]!.cpu)),
  import_ms: round(median(samples[i]!.imported)),
  initialize_ms: round(median(samples[i]!.initialize)),
  floor: candidate.floor,
}));
const byName = new Map(figures.map((f) => [f.name, f]));
console.log(
  `set ${SET}, node ${process.version}: ${RUNS} runs each, interleaved; load average ${round(loadavg()[0]!, 2)} on ${availableParallelism()} cores`,
);
console.log(
  ['candidate', 'KiB read at start', 'init ms', 'cpu ms', 'import ms', 'initialize ms', 'init / its floor', 'cpu / its floor'].join(' | '),
);
for (const f of figures) {
  const floor = byName.get(f.floor)!;
  console.log(
    [
      f.name,
      f.kib_read_at_start,
      f.init_ms,
      f.cpu_ms,
      f.import_ms,
      f.initialize_ms,
      round(f.init_ms / floor.init_ms, 3),
      round(f.cpu_ms / floor.cpu_ms, 3),
    ].join(' | '),
  );
}
console.log(JSON.stringify(figures));
