import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { SDK_NODE_NOTICE_SWITCH } from '../lambdas/local/sdk-node-notice';
import { EnvVars, environmentOf } from '../lambdas/config';
import { read } from '../lambdas/env-var';
import { LOCK_FILE } from '../lambdas/local/dynamodb-local';

/*
 * The stack `npm run chaos` (chaos.ts) disturbs: `npm start`'s code (scripts/start.ts) in a child process, on the
 * run's folder and a fixed port, with the DynamoDB Local it launches; started, killed with SIGKILL and stopped.
 */

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Whether a process of this machine still runs. */
export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` until it holds or `limitMs` has passed; its last answer. */
export async function until(check: () => boolean | Promise<boolean>, limitMs: number): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(200);
  }
  return check();
}

const tsxLoader = import.meta.resolve('tsx');

/** The local stack as a child process, on the run's folder: its output goes to `log`. */
export class ChaosStack {
  readonly baseUrl: string;
  private server: ChildProcess | undefined;

  constructor(private readonly where: { repo: string; stateDir: string; port: number; log: WriteStream }) {
    this.baseUrl = `http://127.0.0.1:${where.port}`;
  }

  /** The server's process id, while one was started. */
  get pid(): number | undefined {
    return this.server?.pid;
  }

  /** The DynamoDB Local the stack launched, from its lock file. */
  emulatorPid(): number | undefined {
    try {
      return (JSON.parse(readFileSync(join(this.where.stateDir, '.local', 'dynamodb', LOCK_FILE), 'utf8')) as { pid?: number }).pid;
    } catch {
      return undefined;
    }
  }

  async healthy(): Promise<boolean> {
    try {
      return (await fetch(`${this.baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })).status === 200;
    } catch {
      return false;
    }
  }

  /** Starts the server; true once it is healthy, false if it exited first or took over 90 s. */
  async start(): Promise<boolean> {
    const child = spawn(process.execPath, ['--import', tsxLoader, join(this.where.repo, 'scripts', 'start.ts')], {
      cwd: this.where.stateDir,
      env: {
        ...process.env,
        PORT: String(this.where.port),
        // Short periods, so that what the reconciler settles is settled within the run.
        // The run speaks the 2025-era protocol, which cannot carry the person's confirmation: the payments it makes are
        // confirmed on the run's side, as a deployment's opt-out allows.
        ...environmentOf({
          confirmationOptOut: ['request_payment'],
          reconcileIntervalMs: 500,
          downstreamTimeoutMs: 1000,
          powertoolsLogLevel:
            read(process.env, EnvVars.powertoolsLogLevel) === 'INFO' ? 'WARN' : read(process.env, EnvVars.powertoolsLogLevel),
        }),
        [SDK_NODE_NOTICE_SWITCH]: 'true',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.pipe(this.where.log, { end: false });
    child.stderr!.pipe(this.where.log, { end: false });
    this.server = child;
    const exited = new Promise<false>((r) => child.once('exit', () => r(false)));
    return Promise.race([until(() => this.healthy(), 90_000), exited]);
  }

  /** SIGKILL: the server ends with no chance to clean up (its DynamoDB Local should follow it). */
  kill(): Promise<void> {
    const child = this.server;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((r) => {
      child.once('exit', () => r());
      child.kill('SIGKILL');
    });
  }

  /** SIGTERM, as a person stops it (SIGKILL after 30 s). */
  async stop(): Promise<void> {
    const child = this.server;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((r) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      child.once('exit', () => {
        clearTimeout(timer);
        r();
      });
      child.kill('SIGTERM');
    });
  }
}
