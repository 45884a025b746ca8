import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * CI runs what a newcomer runs: the README's commands (`npm ci`, `npm test`) and `npm run` scripts, nothing of its
 * own. Three times a step lived only in `.ci/run` (Java, Chromium, Node 22) and CI was green while a fresh clone
 * following the README failed; set-up belongs behind `npm ci` / `npm test` (pretest, the suite's global set-up).
 */
const ALLOWED: readonly RegExp[] = [
  /^set -[a-z]+( -o)?( [a-z]+)?$/,
  /^cd "\$\(dirname "\$0"\)\/\.\."$/,
  /^npm ci( --[a-z-]+)*$/,
  /^npm test$/,
  /^npm run (?<script>[a-z:-]+)( -- [\w -]+)?$/,
];

/** `.ci/run`'s commands: its lines without comments and blank lines, each as written. */
function commands(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** The lines that are not one of the allowed commands, or that name an `npm run` script package.json lacks. */
function foreignSteps(text: string, scripts: Record<string, string>): string[] {
  return commands(text).filter((line) => {
    const match = ALLOWED.map((pattern) => pattern.exec(line)).find(Boolean);
    if (!match) return true;
    const script = match.groups?.script;
    return script !== undefined && !(script in scripts);
  });
}

describe('.ci/run', () => {
  const text = readFileSync(join(PROJECT_ROOT, '.ci/run'), 'utf8');
  const { scripts } = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');

  it("runs only the README's commands and npm run scripts: no set-up step of its own", () => {
    expect(foreignSteps(text, scripts)).toEqual([]);
  });

  it("runs the README's install and test commands, install first", () => {
    const lines = commands(text);
    const install = lines.findIndex((line) => /^npm ci\b/.test(line));
    expect(install).toBeGreaterThanOrEqual(0);
    expect(lines.indexOf('npm test')).toBeGreaterThan(install);
    expect(readme).toMatch(/^npm ci && npm start\b/m);
    expect(readme).toMatch(/^npm test\b/m);
  });

  it('a step of its own is caught: a script run directly, a chained command, an unknown npm script', () => {
    const steps = ['bash scripts/prereqs.sh', 'npm ci && bash test/conformance/install.sh', 'npm run setup-ci', 'npm test; java -version'];
    expect(foreignSteps(steps.join('\n'), scripts)).toEqual(steps);
  });
});
