import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { contract, newKey, relayed, relayedCalls, scratch, sdkClient, setFaults, startTestGateway, type TestGateway } from './support';

/**
 * A lookup that names an argument the call lacks (an optional one) cannot check the call: its lost answer is parked
 * for a person, never reconciled as absent (which would free the key, and the retry would send the edit again).
 */
const policy = {
  tools: {
    edit_file: {
      kind: 'write',
      timeoutMs: 1500,
      inFlightWindowMs: 200,
      // A second edit's text: a call with one edit lacks it.
      reconcile: { tool: 'read_text_file', arguments: { path: '{{path}}' }, found: { textEquals: '{{edits.1.newText}}' } },
    },
    read_text_file: { kind: 'read' },
  },
};

let gateway: TestGateway;
let client: Client;
let root: string;
let files: { log: string; faults: string };
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await scratch('lookup-missing'));
  files = {
    log: join(root, '..', `${root.split('/').pop()}-relay.jsonl`),
    faults: join(root, '..', `${root.split('/').pop()}-faults.json`),
  };
  gateway = await startTestGateway({ policy, argv: relayed(files, 'mcp-server-filesystem', root), env: { RECONCILE_MAX_ATTEMPTS: '2' } });
  client = await sdkClient(gateway);
});
afterAll(async () => {
  await client?.close();
  await gateway?.stop();
  await cleanup?.();
});

it('a lost answer whose lookup names an argument the call lacks is parked for a person, not released: one effect', async () => {
  const path = join(root, 'parked.txt');
  await writeFile(path, 'x');
  await setFaults(files.faults, [{ tool: 'edit_file', match: path, action: 'drop-answer' }]);
  const edit = { path, edits: [{ oldText: 'x', newText: 'xx' }] };
  const key = newKey();
  expect(contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } })).outcome).toBe('unknown');
  let answer = contract({});
  for (let attempt = 0; attempt < 80; attempt++) {
    answer = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    if (answer.outcome !== 'unknown' && answer.outcome !== 'in_progress') break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  expect(answer).toMatchObject({ error: { code: 'REVIEW_REQUIRED' } });
  expect(relayedCalls(files.log).filter((call) => call.name === 'edit_file')).toHaveLength(1);
  expect(relayedCalls(files.log).filter((call) => call.name === 'read_text_file')).toHaveLength(0);
  expect(await readFile(path, 'utf8')).toBe('xx');
});
