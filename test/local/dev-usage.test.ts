import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../lib/package-root';

/**
 * `idempotent-mcp dev` given a mistake, as a team runs it: one sentence naming the mistake, exit code 2 (bad input,
 * as `ops` and `gateway` answer it), nothing started and nothing on stdout.
 */
const run = promisify(execFile);

async function dev(...args: string[]) {
  try {
    const { stdout, stderr } = await run(join(PACKAGE_ROOT, 'node_modules', '.bin', 'tsx'), ['bin/idempotent-mcp.ts', 'dev', ...args], {
      cwd: PACKAGE_ROOT,
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failed = err as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('idempotent-mcp dev refuses bad input with one sentence and exit code 2', () => {
  it.each([
    [['--bogus'], "Unknown option '--bogus'"],
    [[], 'name your tools module'],
    [['a.ts', 'b.ts'], 'one tools module, not 2 (got a.ts, b.ts)'],
    [['no-such-tools.ts'], 'the tools module: no such file'],
    [['README.md'], 'the tools module must be a .ts, .mts, .js or .mjs file (got README.md)'],
    [['--tenant', 'a b', 'x.ts'], '--tenant: tenant id may contain only'],
  ])('dev %j', { timeout: 90_000 }, async (args, mistake) => {
    const result = await dev(...args);
    const lines = result.stderr.split('\n').filter((line) => line.trim());
    expect(lines).toEqual([expect.stringContaining(`idempotent-mcp dev: ${mistake}`)]);
    expect(lines[0]).toMatch(/; see idempotent-mcp dev --help$/);
    expect(result.stdout).toBe('');
    expect(result.code).toBe(2);
  });
});
