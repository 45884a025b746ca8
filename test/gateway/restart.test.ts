import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTestTable } from '../support/dynamodb';
import { BIN, contract, newKey, relayed, relayedCalls, ROOT, scratch } from './support';

/**
 * The gateway's own process SIGKILLed in the middle of a burst of 50 writes, each with its own key, and started
 * again on the same table: every key ends with exactly one effect (one x added to its own file), counted from the
 * files of server-filesystem and from the relay's log.
 */
const policy = {
  tools: {
    edit_file: {
      kind: 'write',
      timeoutMs: 5000,
      inFlightWindowMs: 1000,
      reconcile: { tool: 'read_text_file', arguments: { path: '{{path}}' }, found: { textEquals: '{{edits.0.newText}}' } },
    },
    read_text_file: { kind: 'read' },
  },
};

let table: Awaited<ReturnType<typeof createTestTable>>;
let dir: string;
let cleanup: () => Promise<void>;
let gateway: ChildProcess | undefined;

beforeAll(async () => {
  table = await createTestTable();
  ({ dir, cleanup } = await scratch('restart'));
  await writeFile(join(dir, 'policy.json'), JSON.stringify(policy));
});
afterAll(async () => {
  gateway?.kill('SIGKILL');
  await table?.drop();
  await cleanup?.();
});

/** `npm run gateway`'s code in a child process; resolves with its MCP URL and the token it printed. */
function startGateway(root: string, files: { log: string; faults: string }): Promise<{ url: string; token: string }> {
  const child = spawn(
    join(BIN, 'tsx'),
    [
      'bin/idempotent-mcp.ts',
      'gateway',
      '--policy',
      join(dir, 'policy.json'),
      '--port',
      '0',
      '--state-dir',
      join(dir, 'state'),
      ...relayed(files, 'mcp-server-filesystem', root),
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        DYNAMODB_ENDPOINT: table.endpoint,
        TABLE_NAME: table.tableName,
        RECONCILE_INTERVAL_MS: '200',
        POWERTOOLS_LOG_LEVEL: process.env.GATEWAY_TEST_LOG ? 'INFO' : 'WARN',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  gateway = child;
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (chunk) => {
      err += chunk;
      if (process.env.GATEWAY_TEST_LOG) appendFileSync(process.env.GATEWAY_TEST_LOG, chunk);
    });
    child.stdout!.on('data', (chunk) => {
      out += chunk;
      const url = /MCP URL\s+(\S+)/.exec(out)?.[1];
      const token = /Bearer token\s+(\S+)/.exec(out)?.[1];
      if (url && token) resolve({ url, token });
    });
    child.once('exit', (code) => reject(new Error(`the gateway exited (${code}) before it served: ${err.slice(-2000)}`)));
  });
}

async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'restart-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

it('the gateway SIGKILLed mid-burst of 50 keys and restarted: one effect per key', { timeout: 400_000 }, async () => {
  const root = join(dir, 'files');
  await (await import('node:fs/promises')).mkdir(root);
  const files = { log: join(dir, 'relay.jsonl'), faults: join(dir, 'faults.json') };
  const intents = Array.from({ length: 50 }, (_, i) => ({ key: newKey(), path: join(root, `f${i}.txt`) }));
  for (const { path } of intents) await writeFile(path, 'x');
  const args = (path: string, key: string) => ({ path, edits: [{ oldText: 'x', newText: 'xx' }], idempotency_key: key });

  const first = await startGateway(root, files);
  const client = await connect(first.url, first.token);
  // The burst; its answers are lost with the process.
  // Ten at a time, as an agent's parallel tool calls come: DynamoDB Local on a loaded 2-core machine falls behind 50.
  let next = 0;
  const burst = Array.from({ length: 10 }, async () => {
    while (next < intents.length) {
      const { key, path } = intents[next++]!;
      await client.callTool({ name: 'edit_file', arguments: args(path, key) }).catch(() => undefined);
    }
  });
  for (let i = 0; i < 3000 && relayedCalls(files.log).length < 5; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  gateway!.kill('SIGKILL');
  const sentBeforeKill = relayedCalls(files.log).length;
  expect(sentBeforeKill).toBeGreaterThanOrEqual(5);
  expect(sentBeforeKill).toBeLessThan(50);
  await Promise.all(burst);
  await client.close().catch(() => {});

  const second = await startGateway(root, files);
  const again = await connect(second.url, second.token);
  let pending = 0;
  const outcomes = await Promise.all(
    intents.map(async ({ key, path }) => {
      await new Promise((resolve) => setTimeout(resolve, 100 * pending++));
      for (let attempt = 0; attempt < 400; attempt++) {
        const answer = contract(await again.callTool({ name: 'edit_file', arguments: args(path, key) }));
        if (answer.outcome !== 'unknown' && answer.outcome !== 'in_progress')
          return answer.outcome === 'succeeded' ? answer.outcome : `${answer.outcome}: ${JSON.stringify(answer.error)}`;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      return 'never settled';
    }),
  );
  await again.close();
  expect(outcomes).toEqual(Array(50).fill('succeeded'));
  for (const { path } of intents) expect(await readFile(path, 'utf8'), path).toBe('xx');
  // Sent again only where the lookup found no effect: never a second effect.
  const perPath = new Map<string, number>();
  for (const call of relayedCalls(files.log)) perPath.set(String(call.arguments.path), (perPath.get(String(call.arguments.path)) ?? 0) + 1);
  expect(perPath.size).toBe(50);
  console.log(
    `restart: ${sentBeforeKill} calls reached the upstream before the kill, ${relayedCalls(files.log).length} in all, for 50 keys`,
  );
});
