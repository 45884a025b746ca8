/**
 * `npm run test:durations`: the whole suite with this file as a vitest reporter, which writes each file's seconds on
 * its worker into test/durations.json, which the suite's sequencer reads to start the slowest files first
 * (vitest.config.ts). Also as an extra reporter of any run (`npx vitest run --reporter=default
 * --reporter=./scripts/test-durations.ts [files]`): the files of that run are updated, the others kept.
 *
 * A file's time is its import, its hooks and its tests (vitest's module diagnostic). Not the JSON reporter's window
 * from the first test's start to the last test's end: that leaves out the import and every beforeAll, and a file
 * whose work is its beforeAll (test/cdk/team-app.test.ts synthesizes an app there) would count as under a second.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';
import { PROJECT_ROOT } from './declarations';

const FILE = join(PROJECT_ROOT, 'test/durations.json');
const ABOUT =
  'Seconds per test file on its worker (import, hooks, tests) from the runs of npm run test:durations; the order, not the figures, matters.';

// A default export: vitest loads a reporter given by its path from that.
export default class TestDurations implements Reporter {
  onTestRunEnd(testModules: readonly TestModule[]) {
    let seconds: Record<string, number> = {};
    try {
      seconds = JSON.parse(readFileSync(FILE, 'utf8')).seconds;
    } catch {
      // none yet: this run's files only
    }
    for (const testModule of testModules) {
      const d = testModule.diagnostic();
      const ms = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
      seconds[relative(PROJECT_ROOT, testModule.moduleId)] = Math.round(ms / 100) / 10;
    }
    const sorted = Object.fromEntries(Object.entries(seconds).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])));
    writeFileSync(FILE, `${JSON.stringify({ about: ABOUT, seconds: sorted }, null, 2)}\n`);
    for (const [file, s] of Object.entries(sorted)) console.log(`${String(s).padStart(7)} s  ${file}`);
  }
}
