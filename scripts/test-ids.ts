/**
 * `npm run test:ids`: every test of the suite as one line, `<file> > <describe> > <test>`, sorted, from
 * `vitest list --json`. A change that should keep every test (a faster suite, a moved file) prints the same list
 * before and after: `diff` the two.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { PROJECT_ROOT } from './declarations';

const work = mkdtempSync(join(tmpdir(), 'test-ids-'));
try {
  const out = join(work, 'list.json');
  execFileSync(process.execPath, [join(PROJECT_ROOT, 'node_modules/vitest/vitest.mjs'), 'list', `--json=${out}`], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const tests: { name: string; file: string }[] = JSON.parse(readFileSync(out, 'utf8'));
  const ids = tests.map((t) => `${relative(PROJECT_ROOT, t.file)} > ${t.name}`).sort();
  process.stdout.write(`${ids.join('\n')}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
