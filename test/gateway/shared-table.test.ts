import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestTable } from '../support/dynamodb';
import { contract, newKey, relayed, relayedCalls, scratch, sdkClient, setFaults, startTestGateway, type TestGateway } from './support';

/**
 * Two gateways on one table, each in front of its own server-filesystem (stdio, from the registry, through the relay
 * that logs every `tools/call`): the same tool names on two upstreams. Each gateway's records are its upstream's
 * (TABLE_KEY_PREFIX, by default a digest of the upstream's command), so neither answers, looks up nor settles the
 * other's calls, even under the same tenant and key.
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

interface Side {
  gateway: TestGateway;
  client: Client;
  root: string;
  files: { log: string; faults: string };
  cleanup: () => Promise<void>;
}

let table: Awaited<ReturnType<typeof createTestTable>>;
const sides: Side[] = [];

async function startSide(name: string): Promise<Side> {
  const { dir: root, cleanup } = await scratch(`shared-${name}`);
  const files = {
    log: join(root, '..', `${root.split('/').pop()}-relay.jsonl`),
    faults: join(root, '..', `${root.split('/').pop()}-faults.json`),
  };
  const gateway = await startTestGateway({ policy, argv: relayed(files, 'mcp-server-filesystem', root), table });
  return { gateway, client: await sdkClient(gateway), root, files, cleanup };
}

beforeAll(async () => {
  table = await createTestTable();
  sides.push(await startSide('a'), await startSide('e'));
});
afterAll(async () => {
  for (const side of sides) {
    await side.client.close();
    await side.gateway.stop();
    await side.cleanup();
  }
  await table?.drop();
});

/** Calls again with the same key until the answer is settled (each gateway's reconciler runs every 200 ms here). */
async function settle(side: Side, edit: object, key: string) {
  for (let attempt = 0; attempt < 80; attempt++) {
    const answer = contract(await side.client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    if (answer.outcome !== 'unknown' && answer.outcome !== 'in_progress') return answer;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`key ${key} never settled`);
}

describe('two gateways on one table, the same tool names on two upstreams', () => {
  it('answers lost on both, under the same tenant and key: one effect each, each settled by its own lookup', async () => {
    const key = newKey();
    const edits = await Promise.all(
      sides.map(async (side) => {
        const path = join(side.root, 'lost.txt');
        await writeFile(path, 'x');
        await setFaults(side.files.faults, [{ tool: 'edit_file', match: path, action: 'drop-answer' }]);
        return { path, edits: [{ oldText: 'x', newText: 'xx' }] };
      }),
    );
    // A second pair under keys of their own: the reconcilers have two records each to keep apart.
    const others = await Promise.all(
      sides.map(async (side) => {
        const path = join(side.root, 'lost-other.txt');
        await writeFile(path, 'x');
        await setFaults(side.files.faults, [
          { tool: 'edit_file', match: join(side.root, 'lost.txt'), action: 'drop-answer' },
          { tool: 'edit_file', match: path, action: 'drop-answer' },
        ]);
        return { edit: { path, edits: [{ oldText: 'x', newText: 'xx' }] }, key: newKey() };
      }),
    );
    // All four at once: each call's record and lookup memo are written while the other gateway's are.
    const first = await Promise.all(
      sides.flatMap((side, i) => [
        side.client.callTool({ name: 'edit_file', arguments: { ...edits[i], idempotency_key: key } }),
        side.client.callTool({ name: 'edit_file', arguments: { ...others[i]!.edit, idempotency_key: others[i]!.key } }),
      ]),
    );
    expect(first.map((answer) => contract(answer).outcome)).toEqual(['unknown', 'unknown', 'unknown', 'unknown']);
    for (const [i, side] of sides.entries()) {
      expect(await settle(side, edits[i]!, key)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { settledByLookup: true } });
      expect(await settle(side, others[i]!.edit, others[i]!.key)).toMatchObject({
        outcome: 'succeeded',
        result: { settledByLookup: true },
      });
    }
    for (const [i, side] of sides.entries()) {
      const calls = relayedCalls(side.files.log);
      for (const path of [edits[i]!.path, others[i]!.edit.path]) {
        expect(await readFile(path, 'utf8')).toBe('xx');
        expect(calls.filter((call) => call.name === 'edit_file' && call.arguments.path === path)).toHaveLength(1);
        expect(calls.filter((call) => call.name === 'read_text_file' && call.arguments.path === path).length).toBeGreaterThan(0);
      }
      // Its own lookups only: no call of the other gateway's was ever looked up on this upstream.
      expect(calls.filter((call) => !String(call.arguments.path).startsWith(side.root))).toEqual([]);
    }
  });
});
