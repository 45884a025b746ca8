import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

const run = promisify(execFile);
const EXAMPLES = join(PROJECT_ROOT, 'examples');
const examples = readdirSync(EXAMPLES, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
const npmEnv = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };

/**
 * A stranger's view of the package: `npm pack`, the tarball installed into an empty folder, and every example in
 * examples/ run there. The package and its dependencies come from the tarball's install; the examples' own tools
 * (aws-cdk-lib, esbuild, tsx, typescript) are found in this repository's node_modules, one folder up, rather than
 * downloaded again. Nothing resolves to the repository's sources: the tarball holds only dist/. Each example is a
 * project of its own (package.json with a `test` script); those that need DynamoDB get the test run's DynamoDB Local.
 */
describe('the packed package, installed elsewhere', () => {
  let work: string;
  let app: string;
  let files: string[];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'idempotent-mcp-pack-'));
    symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(work, 'node_modules'), 'dir');
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: PROJECT_ROOT, env: npmEnv, maxBuffer: 64 * 1024 * 1024 });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf('[')));
    files = packed.files.map((f: { path: string }) => f.path);
    app = join(work, 'app');
    cpSync(EXAMPLES, join(app, 'examples'), { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'stranger', private: true, type: 'module' }));
    await run('npm', ['install', join(work, packed.filename), '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: app,
      env: npmEnv,
      maxBuffer: 64 * 1024 * 1024,
    });
  }, 600_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('finds every example a project of its own, with a test script', () => {
    for (const example of examples) expect(JSON.parse(readFileSync(join(EXAMPLES, example, 'package.json'), 'utf8')).scripts?.test, example).toBeTruthy();
  });

  it('ships the build only: no sources, tests or local state', () => {
    expect(files).toContain('dist/engine.js');
    expect(files).toContain('dist/types/lambdas/engine/index.d.ts');
    expect(files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md'].includes(f))).toEqual([]);
  });

  it.each(examples)('runs examples/%s against the installed package', async (example) => {
    const env = { ...npmEnv, DYNAMODB_ENDPOINT: inject('dynamodbEndpoint') };
    const result = await run('npm', ['test'], { cwd: join(app, 'examples', example), env, timeout: 480_000, maxBuffer: 64 * 1024 * 1024 }).catch(
      (err: { stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`examples/${example} failed (${err.message.split('\n')[0]}):\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
      },
    );
    expect(result.stdout).toMatch(/passed/);
  }, 600_000);
});
