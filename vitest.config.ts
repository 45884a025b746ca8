import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';
import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { quietSdkNodeNotice, SDK_NODE_NOTICE_SWITCH } from './lambdas/local/sdk-node-notice';

/**
 * The package's public subpaths (`idempotent-mcp/engine`, ...) resolve to their source here, from the one map in
 * tsconfig.json's `paths` that tsc, tsx and esbuild read too.
 */
const paths: Record<string, string[]> = JSON.parse(readFileSync(new URL('./tsconfig.json', import.meta.url), 'utf8')).compilerOptions.paths;
const subpaths = Object.entries(paths).map(([name, [target]]) => ({
  find: new RegExp(`^${name.replace(/[/.]/g, '\\$&')}$`),
  replacement: fileURLToPath(new URL(target!, import.meta.url)),
}));

/**
 * Files in a process of their own first (see `projects` below), then the slowest files first, by the per-file durations committed in test/durations.json (`npm run test:durations`
 * rewrites them from a run's JSON report). Vitest's own order on a fresh clone, with no results cache, is the
 * largest file first, and the slowest files here are small ones (the model checks, the API report, the pack test):
 * started last, each would run alone at the end while the other worker idles. A file the list does not know (a new
 * one) counts as a typical file (the median).
 */
class SlowestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds: Record<string, number> = JSON.parse(readFileSync(new URL('./test/durations.json', import.meta.url), 'utf8')).seconds;
    const known = Object.values(seconds).sort((a, b) => a - b);
    const typical = known[Math.floor(known.length / 2)] ?? 0;
    const cost = (file: TestSpecification) => seconds[relative(this.ctx.config.root, file.moduleId)] ?? typical;
    // The files of their own process first: vitest keeps a shared worker only while the next file in the queue is
    // a shared one too, so shared files interleaved with them would each start a process again.
    const own = (file: TestSpecification) => (file.project.config.isolate === false ? 1 : 0);
    return [...files].sort((a, b) => own(a) - own(b) || cost(b) - cost(a));
  }
}

/**
 * The fast tier, `npm run test:unit` (vitest.unit.config.ts): the tests beside the module they test (pure: no
 * DynamoDB Local, no child process) and the whole-project checks of test/unit/. Every other folder of test/ needs
 * the local stack, a child process or a build. test/conformance/ and examples/ have runs of their own.
 */
export const UNIT_FOLDERS = ['lambdas', 'lib', 'client', 'bin', 'reference', 'scripts', 'test/models', 'test/unit'];

/**
 * What a test file may change for the files after it in the same process and cannot be put back after it: the
 * module registry (`vi.resetModules`: the files after it would import fresh copies of what they share), mocked
 * modules or globals, and direct writes to `process.env`. Such a file runs in a process of its own (vitest's
 * `isolate`, a fresh fork per file); every other file runs in a shared one, which imports the SDKs, the local stack
 * and the sources once per worker instead of once per file (about 2 s of CPU a file here). Read from the files
 * themselves, so a new test that resets modules is isolated without a list to keep. What vitest can undo, a file in
 * a shared process may change, and test/support/shared-file-guard.ts fails it if it does not: environment variables
 * through `vi.stubEnv` (then `vi.unstubAllEnvs()`) and fake timers (then `vi.useRealTimers()`).
 */
const LEAKS =
  /\bvi\.(stubGlobal|resetModules|mock|doMock)\(|\bprocess\.env(\.\w+|\[[^\]]+\])?\s*=(?!=)|\bdelete\s+process\.env\b|\bObject\.assign\(\s*process\.env\b/;

/**
 * The test files of `folders` as two vitest projects: those that change what their process holds, each in a fresh
 * one, and the rest in shared ones, each file checked for what it left behind. `test` is what both add to the
 * root's options.
 */
export function projects(folders: string[], test: TestProjectInlineConfiguration['test'] = {}): TestProjectInlineConfiguration[] {
  const files = folders
    .flatMap((folder) =>
      readdirSync(new URL(`./${folder}/`, import.meta.url), { recursive: true, encoding: 'utf8' }).map((file) => `${folder}/${file}`),
    )
    .filter((file) => file.endsWith('.test.ts') && !file.includes('node_modules/'));
  // test/conformance/ is `npm run conformance`'s own run (it downloads third-party clients).
  const own = [...new Set(files)]
    .filter((file) => !file.startsWith('test/conformance/'))
    .filter((file) => LEAKS.test(readFileSync(new URL(`./${file}`, import.meta.url), 'utf8')))
    .sort();
  const include = folders.map((folder) => `${folder}/**/*.test.ts`);
  const guard = [...[test.setupFiles ?? []].flat(), 'test/support/shared-file-guard.ts'];
  return [
    {
      extends: true,
      test: {
        ...test,
        name: 'shared',
        include,
        exclude: [...configDefaults.exclude, 'test/conformance/**', ...own],
        isolate: false,
        setupFiles: guard,
      },
    },
    { extends: true, test: { ...test, name: 'own-process', include: own, isolate: true } },
  ];
}

// The run's main process (the global set-up's DynamoDB Local clients) loads the AWS SDK twice (its ESM and CommonJS
// builds), and each copy printed its Node 22 notice: set here, before either loads, as `test.env` does for the workers.
quietSdkNodeNotice();

export default defineConfig({
  resolve: { alias: subpaths },
  test: {
    // One DynamoDB Local for the whole run: the root's global setup, which both projects' files see (not theirs).
    globalSetup: ['test/support/global-setup.ts'],
    projects: projects([...UNIT_FOLDERS, 'test'], { globalSetup: [] }),
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores here: a few files at once keeps DynamoDB Local busy without starving it.
    maxWorkers: 2,
    sequence: { sequencer: SlowestFirstSequencer },
    env: {
      // Node 20 here (Lambda runs 22): the SDK's upgrade notice would repeat in every worker.
      [SDK_NODE_NOTICE_SWITCH]: 'true',
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
    },
  },
});
