import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotentMcpClient } from 'idempotent-mcp/client';
import { contract, newKey, relayed, relayedCalls, scratch, sdkClient, setFaults, startTestGateway, type TestGateway } from './support';

/**
 * The gateway in front of @modelcontextprotocol/server-filesystem (stdio, from the registry), through the relay that
 * counts every `tools/call` it forwards. `edit_file` turning "x" into "xx" shows every repetition in the file: the
 * effects are counted from the file and the relay, never from the gateway.
 */
const policy = {
  tools: {
    edit_file: {
      kind: 'write',
      timeoutMs: 1500,
      // The relay's late-landing case holds a call 2.5 s, 1 s past the timeout: the upstream's window covers it.
      inFlightWindowMs: 3000,
      reconcile: { tool: 'read_text_file', arguments: { path: '{{path}}' }, found: { textEquals: '{{edits.0.newText}}' } },
    },
    read_text_file: { kind: 'read' },
  },
};

let gateway: TestGateway;
let root: string;
let files: { log: string; faults: string };
let cleanup: () => Promise<void>;
let client: Client;
let ours: IdempotentMcpClient;

beforeAll(async () => {
  ({ dir: root, cleanup } = await scratch('fs'));
  files = {
    log: join(root, '..', `${root.split('/').pop()}-relay.jsonl`),
    faults: join(root, '..', `${root.split('/').pop()}-faults.json`),
  };
  gateway = await startTestGateway({ policy, argv: relayed(files, 'mcp-server-filesystem', root) });
  client = await sdkClient(gateway);
  ours = new IdempotentMcpClient({
    url: gateway.mcpUrl,
    token: await gateway.tokenFor('demo'),
    retry: { maxAttempts: 40, maxDelayMs: 500 },
  });
});
afterAll(async () => {
  await client?.close();
  await ours?.close();
  await gateway?.stop();
  await cleanup?.();
});

/** A file holding "x", and the edit that appends one x to it. */
async function target(name: string) {
  const path = join(root, `${name}.txt`);
  await writeFile(path, 'x');
  return { path, edit: { path, edits: [{ oldText: 'x', newText: 'xx' }] } };
}
const callsTo = (path: string) => relayedCalls(files.log).filter((call) => call.name === 'edit_file' && call.arguments.path === path);

describe('gateway in front of server-filesystem', () => {
  it('lists the policy tools only, the write with idempotency_key added and additionalProperties false', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['edit_file', 'get_operation_status', 'read_text_file']);
    const edit = tools.find((tool) => tool.name === 'edit_file')!;
    expect(edit.inputSchema.required).toEqual(expect.arrayContaining(['idempotency_key', 'path', 'edits']));
    expect(edit.inputSchema.additionalProperties).toBe(false);
    expect(edit.description).toMatch(/idempotency_key/);
  });

  it('a retry with the same key replays the first answer: one upstream call, one x added', async () => {
    const { path, edit } = await target('replay');
    const key = newKey();
    const first = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    const second = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    expect(first).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(second).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.result });
    expect(await readFile(path, 'utf8')).toBe('xx');
    expect(callsTo(path)).toHaveLength(1);
  });

  it('reads pass through unchanged', async () => {
    const { path } = await target('read');
    const answer = await client.callTool({ name: 'read_text_file', arguments: { path } });
    expect(answer.content).toEqual([{ type: 'text', text: 'x' }]);
  });

  it('30 equal calls in parallel reach the upstream once (plain SDK client)', async () => {
    const { path, edit } = await target('parallel-sdk');
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } })),
    );
    // The first runs; the others replay, or answer in_progress while it runs (or unknown, had it outlived its timeout).
    expect(
      answers.map((answer) => contract(answer).outcome).filter((outcome) => !['succeeded', 'in_progress', 'unknown'].includes(outcome)),
    ).toEqual([]);
    expect((await settle(edit, key)).outcome).toBe('succeeded');
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });

  it('30 equal calls in parallel reach the upstream once (our client, which retries until settled)', async () => {
    const { path, edit } = await target('parallel-ours');
    const calls = await Promise.all(
      Array.from({ length: 30 }, () => ours.callWrite({ tool: 'edit_file', args: edit, intent: `edit ${path}` })),
    );
    expect(new Set(calls.map((call) => call.key)).size).toBe(1);
    expect(calls.map((call) => call.result?.outcome)).toEqual(Array(30).fill('succeeded'));
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });

  it('the same key with other arguments is a conflict, and nothing is sent', async () => {
    const { path, edit } = await target('conflict');
    const key = newKey();
    expect(contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } })).outcome).toBe('succeeded');
    const other = { path, edits: [{ oldText: 'xx', newText: 'xxx' }] };
    const answer = contract(await client.callTool({ name: 'edit_file', arguments: { ...other, idempotency_key: key } }));
    expect(answer).toMatchObject({ outcome: 'conflict', retryable: false });
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });

  it('a lookup memo that cannot be written: nothing is sent, and the answer says to call again with the same key', async () => {
    const { path } = await target('memo-refused');
    // The memo carries the lookup's filled templates: a text past DynamoDB's 400 KB item limit is refused there.
    const edit = { path, edits: [{ oldText: 'x', newText: 'y'.repeat(410_000) }] };
    const answer = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: newKey() } }));
    expect(answer).toMatchObject({ retryable: true, error: { code: 'STORE_UNAVAILABLE' } });
    expect(callsTo(path)).toHaveLength(0);
    expect(await readFile(path, 'utf8')).toBe('x');
  });

  it('undeclared arguments are refused before anything is sent', async () => {
    const { path, edit } = await target('strict');
    const answer = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: newKey(), dry_run: true } }));
    expect(answer).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS' } });
    expect(callsTo(path)).toHaveLength(0);
  });

  /** Calls again with the same key until the answer is settled (the reconciler runs every 200 ms here). */
  async function settle(edit: object, key: string) {
    for (let attempt = 0; attempt < 80; attempt++) {
      const answer = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
      if (answer.outcome !== 'unknown' && answer.outcome !== 'in_progress') return answer;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`key ${key} never settled`);
  }

  it('an answer lost after the upstream applied the edit: unknown, settled by the lookup, the retry replays; one effect', async () => {
    const { path, edit } = await target('lost-answer');
    await setFaults(files.faults, [{ tool: 'edit_file', match: path, action: 'drop-answer' }]);
    const key = newKey();
    const first = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    expect(first).toMatchObject({ outcome: 'unknown', retryable: true });
    expect(await readFile(path, 'utf8')).toBe('xx');
    const settled = await settle(edit, key);
    expect(settled).toMatchObject({ outcome: 'succeeded', replayed: true, result: { settledByLookup: true } });
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });

  it('the upstream killed mid-call: unknown, the gateway starts it again for the lookup, the retry replays; one effect', async () => {
    const { path, edit } = await target('killed');
    await setFaults(files.faults, [{ tool: 'edit_file', match: path, action: 'kill', ms: 300 }]);
    const key = newKey();
    const first = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    expect(first.outcome).toBe('unknown');
    const settled = await settle(edit, key);
    expect(settled).toMatchObject({ outcome: 'succeeded', result: { settledByLookup: true } });
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
    // The restarted upstream serves new calls.
    const next = await target('after-kill');
    expect(contract(await client.callTool({ name: 'edit_file', arguments: { ...next.edit, idempotency_key: newKey() } })).outcome).toBe(
      'succeeded',
    );
  });

  it('an upstream slower than the timeout, its effect landing late: absent inside the window decides nothing; found after it', async () => {
    const { path, edit } = await target('late');
    // Reaches the server 2.5 s after it was sent: 1 s after the gateway gave up (timeout 1.5 s), inside the 3 s window.
    await setFaults(files.faults, [{ tool: 'edit_file', match: path, action: 'delay', ms: 2500 }]);
    const key = newKey();
    const first = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    expect(first.outcome).toBe('unknown');
    // Not landed yet: the lookup finds "x", which must not release the key; a retry now is not sent again.
    expect(await readFile(path, 'utf8')).toBe('x');
    const early = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    expect(early.outcome).toBe('unknown');
    const settled = await settle(edit, key);
    expect(settled).toMatchObject({ outcome: 'succeeded', result: { settledByLookup: true } });
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });
});
