import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { SlowestFirstSequencer } from './test/support/sequencer';

/**
 * The package's public subpaths (`idempotent-mcp/engine`, ...) resolve to their source here, from the one map in
 * tsconfig.json's `paths` that tsc, tsx and esbuild read too.
 */
const paths: Record<string, string[]> = JSON.parse(readFileSync(new URL('./tsconfig.json', import.meta.url), 'utf8')).compilerOptions.paths;
const subpaths = Object.entries(paths).map(([name, [target]]) => ({
  find: new RegExp(`^${name.replace(/[/.]/g, '\\$&')}$`),
  replacement: fileURLToPath(new URL(target!, import.meta.url)),
}));

export default defineConfig({
  resolve: { alias: subpaths },
  test: {
    include: ['test/**/*.test.ts'],
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
