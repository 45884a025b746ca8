import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT as PROJECT_ROOT } from '../../lib/package-root';
import { childBundle } from '../support/child-bundle';

/**
 * `npm start` as a user runs it: its own DynamoDB Local on a `.local/` folder in the working directory. What the
 * terminal shows, and what happens when `.local/` is deleted under the running server.
 *
 * The first start runs scripts/start.ts through tsx, as `npm start` does; the others run the same file built once per
 * run by esbuild (`childBundle`, which tsx also transforms with): tsx loads every source file and package through its
 * loader on each start, about 2.5 s of CPU more a start.
 */
interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** How the start runs: `tsx`, as `npm start` runs it, or `built`, scripts/start.ts built by esbuild. */
type How = 'tsx' | 'built';
const startCommand = async (how: How): Promise<[string, string[]]> =>
  how === 'tsx'
    ? [
        join(PROJECT_ROOT, 'node_modules/.bin/tsx'),
        ['--tsconfig', join(PROJECT_ROOT, 'tsconfig.json'), join(PROJECT_ROOT, 'scripts/start.ts')],
      ]
    : [process.execPath, [(await childBundle('npm-start', { start: 'scripts/start.ts' })).start]];

async function npmStart(cwd: string, userEnv: NodeJS.ProcessEnv = {}, how: How = 'built'): Promise<Started> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0' };
  // As in a user's shell: no test-run settings, no emulator of the test run (unless the user names one).
  for (const name of ['DYNAMODB_ENDPOINT', 'SQS_ENDPOINT', 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED', 'POWERTOOLS_LOG_LEVEL'])
    delete env[name];
  Object.assign(env, userEnv);
  const [command, args] = await startCommand(how);
  const child = spawn(command, args, {
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

  const NEW_KEY = /A new signing key was made in .*: tokens printed by an earlier start are refused/;

  it('prints no notice a user cannot act on, says how to quiet the logs, what .local/ holds and when it made a new signing key, and stops saying why when .local/ is deleted', async () => {
    const first = await npmStart(cwd, {}, 'tsx');
    expect(first.stderr()).not.toContain('NodeVersionSupportWarning');
    expect(first.stdout()).toContain('POWERTOOLS_LOG_LEVEL=WARN npm start');
    expect(first.stdout()).toMatch(/\.local\/ holds the data, the token signing key and the operation-id secret/);
    expect(first.stdout()).toMatch(NEW_KEY);
    // Stopped (how a stop ends is the lifecycle tests' business): the next start finds the data and key of this one.
    first.child.kill('SIGTERM');
    await first.exited;
    const second = await npmStart(cwd);
    expect(second.stdout()).not.toMatch(/new signing key/);

    // The whole folder deleted while running: it says what is gone and what follows, and stops.
    await rm(join(cwd, '.local'), { recursive: true, force: true });
    expect(await second.exited).toBe(1);
    expect(second.stderr()).toMatch(/\.local was deleted .* while npm start was running/);
    expect(second.stderr()).toMatch(/tokens printed before it will be refused/);

    // The next start, as README's troubleshooting says, tells that earlier tokens are now refused.
    const third = await npmStart(cwd);
    expect(third.stdout()).toMatch(NEW_KEY);
    third.child.kill('SIGTERM');
    await third.exited;
  }, 180_000);

  it('with DYNAMODB_ENDPOINT (README troubleshooting), runs on that DynamoDB Local and does not stop itself', async () => {
    const own = await mkdtemp(join(tmpdir(), 'npm-start-endpoint-'));
    try {
      const started = await npmStart(own, { DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT! });
      // The state folder is checked every second: a few checks pass without a data folder of its own.
      await new Promise((resolve) => setTimeout(resolve, 3500));
      expect(started.child.exitCode, started.stderr()).toBeNull();
      expect(started.stderr()).not.toMatch(/was deleted/);
      expect(existsSync(join(own, '.local', 'dynamodb'))).toBe(false);
      started.child.kill('SIGTERM');
      await started.exited;
    } finally {
      await rm(own, { recursive: true, force: true });
    }
  }, 120_000);

  it("says where a payment is approved, and says loudly when the opt-out lets payments run without anyone's approval", async () => {
    const own = await mkdtemp(join(tmpdir(), 'npm-start-opt-out-'));
    const start = async (env: NodeJS.ProcessEnv) => {
      const started = await npmStart(own, { DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!, ...env });
      started.child.kill('SIGTERM');
      await started.exited;
      return started.stdout();
    };
    try {
      const approved = await start({ CONFIRMATION_OPT_OUT_TOOLS: '' });
      expect(approved).toMatch(
        /Approval +request_payment: a signed-in person approves each call at http:\/\/127\.0\.0\.1:\d+\/approvals\//,
      );
      expect(approved).not.toMatch(/WITHOUT/);
      const optedOut = await start({ CONFIRMATION_OPT_OUT_TOOLS: 'request_payment' });
      expect(optedOut).toMatch(/WARNING +request_payment runs WITHOUT anyone's approval for 2025-era clients/);
    } finally {
      await rm(own, { recursive: true, force: true });
    }
  }, 180_000);
});
