import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { DynamoDBClient, CreateTableCommand, GetItemCommand, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LOCK_FILE, makeDynamoDbLocalArchive, startDynamoDbLocal, type DynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { startLocalStack, type LocalStack } from '../support/local-stack';
import { FAILURE_WARNING_INTERVAL_MS } from '../../lambdas/local/workers';
import { childBundle } from '../support/child-bundle';

// These tests launch emulators of their own, on data folders: not the run's shared one.
beforeAll(() => {
  vi.stubEnv('DYNAMODB_ENDPOINT', undefined);
});

const dirs: string[] = [];
const pidsToKill: number[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ddb-lifecycle-'));
  dirs.push(dir);
  return join(dir, 'dynamodb');
};
afterAll(() => {
  vi.unstubAllEnvs();
  for (const pid of pidsToKill) kill(pid, 'SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function kill(pid: number, signal: NodeJS.Signals) {
  try {
    process.kill(pid, signal);
  } catch {
    // gone
  }
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Polls until `check` holds; false if it never did within `limitMs` (a bound, not a timing assertion). */
async function eventually(check: () => boolean | Promise<boolean>, limitMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(100);
  }
  return check();
}

const clientOf = (endpoint: string) =>
  new DynamoDBClient({ endpoint, region: 'local', credentials: { accessKeyId: 'l', secretAccessKey: 'l' }, maxAttempts: 1 });

async function writeInTransaction(endpoint: string, keys: string[]) {
  const client = clientOf(endpoint);
  await client
    .send(
      new CreateTableCommand({
        TableName: 'lifecycle',
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    )
    .catch(() => {});
  for (const key of keys)
    await client.send(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: 'lifecycle', Item: { pk: { S: key } } } }] }));
  client.destroy();
}
async function has(endpoint: string, key: string): Promise<boolean> {
  const client = clientOf(endpoint);
  try {
    return (await client.send(new GetItemCommand({ TableName: 'lifecycle', Key: { pk: { S: key } } }))).Item !== undefined;
  } finally {
    client.destroy();
  }
}

/**
 * A process of its own that owns an emulator on `dbPath` and keeps it busy with writes: test/support/emulator-owner.ts
 * built once per run (a start through tsx costs about 2.5 s of CPU more, loading every source through its loader).
 */
async function startOwner(dbPath: string, leak = false): Promise<{ owner: ChildProcess; pid: number; holder?: number }> {
  const { owner: ownerFile } = await childBundle('emulator-owner', { owner: 'test/support/emulator-owner.ts' });
  const owner = spawn(process.execPath, [ownerFile, dbPath, ...(leak ? ['--leak'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  pidsToKill.push(owner.pid!);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: owner.stdout! }).once('line', resolve);
    owner.once('exit', (code) => reject(new Error(`owner exited with ${code}`)));
  });
  const started = JSON.parse(line) as { pid: number; holder?: number };
  pidsToKill.push(started.pid);
  if (started.holder) pidsToKill.push(started.holder);
  return { owner, ...started };
}

describe('DynamoDB Local never outlives the process that started it', () => {
  it('a SIGKILL of its owner mid-burst stops it, even while another process holds a copy of the watchdog pipe', async () => {
    const { owner, pid, holder } = await startOwner(freshDir(), true);
    expect(holder && alive(holder)).toBeTruthy();
    owner.kill('SIGKILL');
    expect(await eventually(() => !alive(pid))).toBe(true);
    // The holder kept the pipe open all along: end-of-file alone would never have come.
    expect(alive(holder!)).toBe(true);
  }, 60_000);

  it('a start on a data folder another live emulator holds is refused with a message naming it', async () => {
    const dbPath = freshDir();
    const { owner, pid } = await startOwner(dbPath);
    await expect(startDynamoDbLocal({ dbPath, log: () => {} })).rejects.toThrow(
      new RegExp(`in use by DynamoDB Local \\(pid ${pid}\\) started by process ${owner.pid}`),
    );
    expect(alive(pid)).toBe(true);
    // Its owner dies: the next start waits for the watchdog to stop that emulator, then takes the folder over.
    const gone = new Promise((r) => owner.once('exit', r));
    owner.kill('SIGKILL');
    await gone;
    const next = await startDynamoDbLocal({ dbPath, log: () => {} });
    try {
      expect(alive(pid)).toBe(false);
      expect(JSON.parse(readFileSync(join(dbPath, LOCK_FILE), 'utf8'))).toMatchObject({ owner: process.pid, pid: next.pid });
    } finally {
      await next.stop();
    }
    expect(existsSync(join(dbPath, LOCK_FILE))).toBe(false);
  }, 90_000);
});

describe('a stop is graceful, and a dead emulator is restarted on the same data', () => {
  let emulator: DynamoDbLocal | undefined;
  afterEach(() => emulator?.stop());

  it('stop() returns once Java has exited, and every acknowledged transaction is on disk', async () => {
    const dbPath = freshDir();
    emulator = await startDynamoDbLocal({ dbPath, log: () => {} });
    const pid = emulator.pid!;
    const keys = Array.from({ length: 20 }, (_, i) => `k${i}`);
    await writeInTransaction(emulator.endpoint, keys);
    await emulator.stop();
    expect(alive(pid)).toBe(false);
    emulator = await startDynamoDbLocal({ dbPath, log: () => {} });
    for (const key of keys) expect(await has(emulator.endpoint, key)).toBe(true);
  }, 90_000);

  it('kill -9 of Java: restarted on the same port and data, one log line per attempt', async () => {
    const dbPath = freshDir();
    const lines: string[] = [];
    // The back-off between restarts is not what this proves: a tenth of the default.
    emulator = await startDynamoDbLocal({ dbPath, log: (line) => lines.push(line), restartBackoffMs: 50 });
    await writeInTransaction(emulator.endpoint, ['before']);
    // A clean stop of Java first: the data is flushed, so nothing depends on the emulator's durability here.
    const first = emulator.pid!;
    kill(first, 'SIGTERM');
    expect(await eventually(async () => emulator!.pid !== undefined && emulator!.pid !== first && (await emulator!.reachable()))).toBe(
      true,
    );
    const second = emulator.pid!;
    kill(second, 'SIGKILL');
    expect(await eventually(async () => emulator!.pid !== undefined && emulator!.pid !== second && (await emulator!.reachable()))).toBe(
      true,
    );
    expect(await has(emulator.endpoint, 'before')).toBe(true);
    expect(lines.filter((l) => /restarting it on the same data \(attempt \d of \d\)/.test(l))).toHaveLength(2);
    expect(lines.some((l) => l.includes(`(pid ${second}) exited (killed by signal 9`))).toBe(true);
  }, 90_000);
});

describe("npm start's stack notices its store is gone", () => {
  let stack: LocalStack | undefined;
  afterAll(() => stack?.stop());

  it('/health is 503 while DynamoDB Local is down and 200 once it is back; writes work again; workers warn rarely', async () => {
    const dir = freshDir();
    const warnings: string[] = [];
    const logger = new Logger({ logLevel: 'SILENT' });
    logger.warn = (message: unknown, ..._rest: unknown[]) => void warnings.push(String(message));
    // Workers that poll often: without a limit, every failed run during the outage would warn.
    stack = await startLocalStack({
      persistDir: dir,
      services: { logger },
      env: { RECONCILE_INTERVAL_MS: '100' },
      workers: { relayPollMs: 100 },
    });
    expect((await fetch(`${stack.url}/health`)).status).toBe(200);
    const lock = JSON.parse(readFileSync(join(dir, 'dynamodb', LOCK_FILE), 'utf8')) as { pid: number };
    const killedAt = Date.now();
    kill(lock.pid, 'SIGKILL');
    expect(await eventually(async () => (await fetch(`${stack!.url}/health`)).status === 503)).toBe(true);
    expect(await eventually(async () => (await fetch(`${stack!.url}/health`)).status === 200)).toBe(true);
    const outageMs = Date.now() - killedAt;
    expect(warnings.filter((w) => w.includes('restarting it on the same data (attempt 1 of'))).toHaveLength(1);
    // At most one warning per worker and FAILURE_WARNING_INTERVAL_MS of outage.
    const allowed = 1 + Math.floor(outageMs / FAILURE_WARNING_INTERVAL_MS);
    expect(warnings.filter((w) => w.startsWith('outbox relay failed')).length).toBeLessThanOrEqual(allowed);
    expect(warnings.filter((w) => w.startsWith('reconciler failed')).length).toBeLessThanOrEqual(allowed);
    const body = await (await fetch(`${stack.url}/health`)).json();
    expect(body).toEqual({ status: 'ok' });
    await expect(stack.services.doc.send(new ScanCommand({ TableName: stack.config.tableName, Limit: 1 }))).resolves.toBeDefined();
  }, 90_000);
});

describe("DynamoDB Local's class-data archive", () => {
  it("once made, a start loads the emulator's classes from it (Java maps the archive)", async () => {
    // Made once per machine (the test run's global setup starts making it): this waits for it, or makes it.
    expect(await makeDynamoDbLocalArchive()).toBe(true);
    const emulator = await startDynamoDbLocal({ log: () => {} });
    try {
      expect(readFileSync(`/proc/${emulator.pid}/maps`, 'utf8')).toMatch(/\/\.cache\/dynamodb-local\/\w+\/classes\.jsa$/m);
      expect(await emulator.reachable()).toBe(true);
    } finally {
      await emulator.stop();
    }
  }, 180_000);
});
