import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PACKAGE_ROOT as ROOT } from '../../lib/package-root';
import { createTestTable } from '../support/dynamodb';
import { scratch } from '../gateway/support';

/**
 * docs/gateway.md's five-minute walk-through, run as printed: its shell blocks in order, in a scratch folder in place
 * of /tmp/gateway-demo and on a free port in place of 3100, with the token the gateway printed in place of the
 * placeholder. The block marked `docs-test: background` is the gateway itself (it runs until stopped). DynamoDB Local
 * is the suite's (DYNAMODB_ENDPOINT set, so `npm run gateway` starts none of its own).
 */
const run = promisify(execFile);
const DEMO = '/tmp/gateway-demo';

interface Block {
  code: string;
  background: boolean;
}

function walkThrough(markdown: string): Block[] {
  const section = markdown.split('\n## ').find((part) => part.startsWith('Five minutes, locally'));
  if (!section) throw new Error('docs/gateway.md has no "Five minutes, locally" section');
  const lines = section.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```bash') continue;
    const end = lines.indexOf('```', i + 1);
    blocks.push({ code: lines.slice(i + 1, end).join('\n'), background: lines[i - 1] === '<!-- docs-test: background -->' });
    i = end;
  }
  return blocks;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

let gateway: ChildProcess | undefined;
let table: Awaited<ReturnType<typeof createTestTable>>;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  table = await createTestTable();
  ({ dir, cleanup } = await scratch('docs'));
});
afterAll(async () => {
  if (gateway?.pid) process.kill(-gateway.pid, 'SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 500));
  if (gateway?.pid) {
    try {
      process.kill(-gateway.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await table?.drop();
  await cleanup?.();
});

it('runs the walk-through as printed: the same key twice, one edit upstream', { timeout: 180_000 }, async () => {
  const blocks = walkThrough(await readFile(join(ROOT, 'docs/gateway.md'), 'utf8'));
  expect(blocks.map((block) => block.background)).toEqual([false, true, false]);
  const port = await freePort();
  const local = (code: string) =>
    code.replaceAll(DEMO, dir).replaceAll('127.0.0.1:3100', `127.0.0.1:${port}`).replaceAll('--port 3100', `--port ${port}`);
  const env = { ...process.env, DYNAMODB_ENDPOINT: table.endpoint, TABLE_NAME: table.tableName, POWERTOOLS_LOG_LEVEL: 'WARN' };

  await run('bash', ['-euo', 'pipefail', '-c', local(blocks[0]!.code)], { cwd: ROOT, env });

  // The gateway, in its own process group (npm, tsx, node, the filesystem server): stopped as one.
  gateway = spawn('bash', ['-c', local(blocks[1]!.code)], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const token = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    gateway!.stdout!.on('data', (chunk) => {
      out += chunk;
      const printed = /Bearer token\s+(\S+)/.exec(out)?.[1];
      if (printed) resolve(printed);
    });
    gateway!.stderr!.on('data', (chunk) => (err += chunk));
    gateway!.once('exit', (code) => reject(new Error(`the gateway exited (${code}): ${out}\n${err}`.slice(-3000))));
  });

  const calls = local(blocks[2]!.code).replace('export TOKEN=<the bearer token it printed>', `export TOKEN=${token}`);
  expect(calls).not.toContain('<the bearer token');
  const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', calls], { cwd: ROOT, env });
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(3);
  const contract = (line: string) =>
    (JSON.parse(line) as { result: { structuredContent: { outcome: string; replayed: boolean; result: unknown } } }).result
      .structuredContent;
  expect(contract(lines[0]!)).toMatchObject({ outcome: 'succeeded', replayed: false });
  expect(contract(lines[1]!)).toMatchObject({ outcome: 'succeeded', replayed: true, result: contract(lines[0]!).result });
  // The upstream's own state: one edit.
  expect(lines[2]).toBe('xx');
  expect(await readFile(join(dir, 'notes.txt'), 'utf8')).toBe('xx');
});
