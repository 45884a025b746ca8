import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * A source file a new maintainer can read in one sitting (issue 48): past about 500 lines a file holds more than one
 * subject, and is split by what its parts do. Tests (`*.test.ts`), generated files (a `generated/` folder) and the
 * API reports (`*.api.md`, not code) do not count.
 */
const MAX_LINES = 500;
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs|sh)$/;
/** Folders that hold no source of this project: installed packages, builds, tools and caches. */
const NOT_SOURCE = new Set([
  'node_modules',
  'dist',
  'cdk.out',
  'coverage',
  'generated',
  '.tools',
  '.git',
  '.local',
  '.bench',
  '.scratch',
  '.agent',
]);

const sourceFiles = (folder: string): string[] =>
  readdirSync(join(PROJECT_ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = folder ? `${folder}/${entry.name}` : entry.name;
    if (entry.isDirectory()) return NOT_SOURCE.has(entry.name) || entry.name.startsWith('.api-report-') ? [] : sourceFiles(path);
    return SOURCE.test(entry.name) && !entry.name.endsWith('.test.ts') ? [path] : [];
  });

const lineCount = (file: string) => readFileSync(join(PROJECT_ROOT, file), 'utf8').trimEnd().split('\n').length;

it(`no source file is over ${MAX_LINES} lines`, () => {
  const files = sourceFiles('');
  expect(files).toContain('lambdas/store/dynamodb-idempotency-store.ts');
  expect(files.filter((file) => lineCount(file) > MAX_LINES).map((file) => `${file}: ${lineCount(file)} lines`)).toEqual([]);
});
