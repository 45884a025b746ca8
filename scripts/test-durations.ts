/**
 * `npm run test:durations -- <report.json>`: the per-file durations of a vitest run (its JSON report:
 * `npx vitest run --reporter=json --outputFile.json=<report.json>`) into test/durations.json, which the suite's
 * sequencer reads to start the slowest files first (vitest.config.ts). Prints the files, slowest first.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { PROJECT_ROOT } from './declarations';

const report = process.argv[2];
if (!report) throw new Error('Usage: npm run test:durations -- <vitest JSON report>');
const results: { name: string; startTime: number; endTime: number }[] = JSON.parse(readFileSync(report, 'utf8')).testResults;
const seconds = Object.fromEntries(
  results
    .map((r) => [relative(PROJECT_ROOT, r.name), Math.round((r.endTime - r.startTime) / 100) / 10] as const)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])),
);
writeFileSync(join(PROJECT_ROOT, 'test/durations.json'), JSON.stringify({ about: 'Seconds per test file from one run (npm run test:durations); the order, not the figures, matters.', seconds }, null, 2) + '\n');
for (const [file, s] of Object.entries(seconds)) console.log(`${String(s).padStart(7)} s  ${file}`);
