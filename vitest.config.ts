import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

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
 * The slowest files first, by the per-file durations committed in test/durations.json (`npm run test:durations`
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
    return [...files].sort((a, b) => cost(b) - cost(a));
  }
}

/**
 * The fast tier, `npm run test:unit` (vitest.unit.config.ts): the tests beside the module they test (pure: no
 * DynamoDB Local, no child process) and the whole-project checks of test/unit/. Every other folder of test/ needs
 * the local stack, a child process or a build. conformance/ and examples/ have runs of their own.
 */
export const UNIT_TESTS = ['{lambdas,lib,client,ops,bin,reference,local,scripts,proof}/**/*.test.ts', 'test/unit/**/*.test.ts'];

export default defineConfig({
  resolve: { alias: subpaths },
  test: {
    include: [...UNIT_TESTS, 'test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores here: a few files at once keeps DynamoDB Local busy without starving it.
    maxWorkers: 2,
    sequence: { sequencer: SlowestFirstSequencer },
    env: {
      // Node 20 here (Lambda runs 22): the SDK's upgrade notice would repeat in every worker.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
    },
  },
});
