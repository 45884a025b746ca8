import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT as PROJECT_ROOT } from '../../lib/package-root';

/**
 * `npm start` as a user runs it: its own DynamoDB Local on a `.local/` folder in the working directory. What the
 * terminal shows, and what happens when `.local/` is deleted under the running server.
 */
interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function npmStart(cwd: string): Promise<Started> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0' };
  // As in a user's shell: no test-run settings, no emulator of the test run.
  for (const name of ['DYNAMODB_ENDPOINT', 'SQS_ENDPOINT', 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED', 'POWERTOOLS_LOG_LEVEL']) delete env[name];
  const child = spawn(join(PROJECT_ROOT, 'node_modules/.bin/tsx'), ['--tsconfig', join(PROJECT_ROOT, 'tsconfig.json'), join(PROJECT_ROOT, 'scripts/start.ts')], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  child.stderr!.on('data', (chunk) => (err += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const ready = () => out.includes('Ctrl-C to stop.') && resolve({ child, stdout: () => out, stderr: () => err, exited });
    child.stdout!.on('data', ready);
    void exited.then((code) => reject(new Error(`npm start exited (${code}) before it was ready:\n${out}\n${err}`)));
  });
}

describe('npm start', () => {
  let cwd: string;
  beforeAll(async () => {
    cwd = await mkdtemp(join(tmpdir(), 'npm-start-'));
  });
  afterAll(() => rm(cwd, { recursive: true, force: true }));

  it('prints no notice a user cannot act on, says how to quiet the logs and what .local/ holds, and stops saying why when .local/ is deleted', async () => {
    const first = await npmStart(cwd);
    expect(first.stderr()).not.toContain('NodeVersionSupportWarning');
    expect(first.stdout()).toContain('POWERTOOLS_LOG_LEVEL=WARN npm start');
    expect(first.stdout()).toMatch(/\.local\/ holds the data, the token signing key and the operation-id secret/);
    expect(first.stdout()).not.toContain('no signing key');
    // Stopped (how a stop ends is the lifecycle tests' business): the next start finds the data of this one.
    first.child.kill('SIGTERM');
    await first.exited;

    // The signing key deleted while stopped: the next start says that earlier tokens are now refused.
    await rm(join(cwd, '.local', 'auth'), { recursive: true, force: true });
    const second = await npmStart(cwd);
    expect(second.stdout()).toMatch(/had no signing key: a new one was made, so tokens printed before this start are refused/);

    // The whole folder deleted while running: it says what is gone and what follows, and stops.
    await rm(join(cwd, '.local'), { recursive: true, force: true });
    expect(await second.exited).toBe(1);
    expect(second.stderr()).toMatch(/\.local was deleted .* while npm start was running/);
    expect(second.stderr()).toMatch(/tokens printed before it will be refused/);
  }, 120_000);
});
