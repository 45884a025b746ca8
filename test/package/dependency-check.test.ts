import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const knip = join(root, 'node_modules/.bin/knip');

/**
 * `npm test` runs knip with the project's knip.jsonc (dependencies among its checks). Here its dependency check on a
 * copy of one real source file, as an entry file of the package (knip reads what the entries reach), with and without
 * its import declared: an import that resolves only through hoisting fails.
 */
describe('the dependency check of npm test', () => {
  const dir = mkdtempSync(join(tmpdir(), 'knip-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function check(declared: Record<string, string>): Promise<{ code: number; output: string }> {
    const source = 'lambdas/store/refusals.ts';
    const copy = 'exports/refusals.ts';
    mkdirSync(dirname(join(dir, copy)), { recursive: true });
    copyFileSync(join(root, source), join(dir, copy));
    // Its one relative import, beside it as in the tree (../core/errors), so only the package import is in question.
    mkdirSync(join(dir, 'core'), { recursive: true });
    copyFileSync(join(root, 'lambdas/core/errors.ts'), join(dir, 'core/errors.ts'));
    copyFileSync(join(root, 'knip.jsonc'), join(dir, 'knip.jsonc'));
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'fixture', version: '1.0.0', type: 'module', private: true, dependencies: declared }),
    );
    try {
      const { stdout } = await promisify(execFile)(knip, ['--dependencies', '--no-progress', '--no-config-hints'], { cwd: dir });
      return { code: 0, output: stdout };
    } catch (err) {
      const failed = err as { code: number; stdout: string };
      return { code: failed.code, output: failed.stdout };
    }
  }

  it('passes when every imported package is declared, and fails naming the one that is not', async () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const utilDynamodb = { '@aws-sdk/util-dynamodb': pkg.dependencies['@aws-sdk/util-dynamodb']! };
    expect(await check(utilDynamodb)).toMatchObject({ code: 0 });
    const undeclared = await check({});
    expect(undeclared.code).not.toBe(0);
    expect(undeclared.output).toMatch(/Unlisted dependencies[\s\S]*@aws-sdk\/util-dynamodb\s+exports\/refusals\.ts/);
  }, 60_000);
});
