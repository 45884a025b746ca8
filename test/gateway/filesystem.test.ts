import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
      inFlightWindowMs: 1000,
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

beforeAll(async () => {
  ({ dir: root, cleanup } = await scratch('fs'));
  files = { log: join(root, '..', `${root.split('/').pop()}-relay.jsonl`), faults: join(root, '..', `${root.split('/').pop()}-faults.json`) };
  gateway = await startTestGateway({ policy, argv: relayed(files, 'mcp-server-filesystem', root) });
  client = await sdkClient(gateway);
});
afterAll(async () => {
  await client?.close();
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
});

export { setFaults };
