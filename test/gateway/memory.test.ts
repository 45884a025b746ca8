import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotentMcpClient } from 'idempotent-mcp/client';
import { contract, newKey, relayed, relayedCalls, scratch, sdkClient, setFaults, startTestGateway, type TestGateway } from './support';

/**
 * The gateway in front of @modelcontextprotocol/server-memory (stdio, from the registry), its graph in the file that
 * MEMORY_FILE_PATH names: the gateway's per-tenant `env` credential sets it, so each tenant has a process and a
 * graph of its own. Effects are counted from the relay and from that file.
 */
const policy = {
  tools: {
    create_entities: {
      kind: 'write',
      timeoutMs: 3000,
      inFlightWindowMs: 1000,
      reconcile: {
        tool: 'open_nodes',
        arguments: { names: ['{{entities.0.name}}'] },
        found: { structured: { field: 'entities.0.name', equals: '{{entities.0.name}}' } },
      },
    },
    open_nodes: { kind: 'read' },
  },
};

let gateway: TestGateway;
let dir: string;
let cleanup: () => Promise<void>;
let files: { log: string; faults: string };
let client: Client;

beforeAll(async () => {
  ({ dir, cleanup } = await scratch('memory'));
  files = { log: join(dir, 'relay.jsonl'), faults: join(dir, 'faults.json') };
  const credentials = join(dir, 'credentials.json');
  await writeFile(
    credentials,
    JSON.stringify({
      tenants: {
        demo: { env: { MEMORY_FILE_PATH: join(dir, 'demo.jsonl') } },
        other: { env: { MEMORY_FILE_PATH: join(dir, 'other.jsonl') } },
      },
    }),
  );
  gateway = await startTestGateway({ policy, argv: ['--credentials', credentials, ...relayed(files, 'mcp-server-memory')] });
  client = await sdkClient(gateway);
});
afterAll(async () => {
  await client?.close();
  await gateway?.stop();
  await cleanup?.();
});

/** The entities of a tenant's graph file, by name (the server's own state). */
async function entities(tenant: string, name: string): Promise<number> {
  const text = await readFile(join(dir, `${tenant}.jsonl`), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string; name?: string })
    .filter((item) => item.type === 'entity' && item.name === name).length;
}
const creates = (name: string) =>
  relayedCalls(files.log).filter((call) => call.name === 'create_entities' && JSON.stringify(call.arguments).includes(name));
const entity = (name: string) => ({ entities: [{ name, entityType: 'customer', observations: ['signed up'] }] });

describe('gateway in front of server-memory', () => {
  it('30 equal calls in parallel reach the upstream once (plain SDK client)', async () => {
    const name = `alice-${newKey()}`;
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => client.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } })),
    );
    // The first runs; the others replay, or answer in_progress while it runs (or unknown, had it outlived its timeout).
    expect(
      answers.map((answer) => contract(answer).outcome).filter((outcome) => !['succeeded', 'in_progress', 'unknown'].includes(outcome)),
    ).toEqual([]);
    let settled = contract(answers[0]);
    for (let attempt = 0; attempt < 80 && settled.outcome !== 'succeeded'; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      settled = contract(await client.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } }));
    }
    expect(settled.outcome).toBe('succeeded');
    expect(creates(name)).toHaveLength(1);
    expect(await entities('demo', name)).toBe(1);
  });

  it('30 equal calls in parallel reach the upstream once (our client)', async () => {
    const ours = new IdempotentMcpClient({
      url: gateway.mcpUrl,
      token: await gateway.tokenFor('demo'),
      retry: { maxAttempts: 40, maxDelayMs: 500 },
    });
    const name = `bob-${newKey()}`;
    const calls = await Promise.all(
      Array.from({ length: 30 }, () => ours.callWrite({ tool: 'create_entities', args: entity(name), intent: name })),
    );
    await ours.close();
    expect(calls.map((call) => call.result?.outcome)).toEqual(Array(30).fill('succeeded'));
    expect(creates(name)).toHaveLength(1);
    expect(await entities('demo', name)).toBe(1);
  });

  it('the same key with other arguments is a conflict, and nothing is sent', async () => {
    const key = newKey();
    const name = `carol-${key}`;
    expect(contract(await client.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } })).outcome).toBe(
      'succeeded',
    );
    const answer = contract(
      await client.callTool({ name: 'create_entities', arguments: { ...entity(`dave-${key}`), idempotency_key: key } }),
    );
    expect(answer.outcome).toBe('conflict');
    expect(creates(`dave-${key}`)).toHaveLength(0);
    expect(await entities('demo', `dave-${key}`)).toBe(0);
  });

  it('an answer lost after the upstream applied it: unknown, found by open_nodes, the retry replays; one entity', async () => {
    const name = `erin-${newKey()}`;
    await setFaults(files.faults, [{ tool: 'create_entities', match: name, action: 'drop-answer' }]);
    const key = newKey();
    const first = contract(await client.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } }));
    expect(first.outcome).toBe('unknown');
    let settled = first;
    for (let attempt = 0; attempt < 80 && ['unknown', 'in_progress'].includes(settled.outcome); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      settled = contract(await client.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } }));
    }
    expect(settled).toMatchObject({ outcome: 'succeeded', replayed: true, result: { settledByLookup: true } });
    expect(creates(name)).toHaveLength(1);
    expect(await entities('demo', name)).toBe(1);
  });

  it("each tenant's calls go to its own process, with its own environment: one tenant's key never answers another", async () => {
    const other = await sdkClient(gateway, 'other');
    const name = `frank-${newKey()}`;
    const key = newKey();
    let outcome = '';
    for (let attempt = 0; attempt < 40 && outcome !== 'succeeded'; attempt++) {
      outcome = contract(await other.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } })).outcome;
      if (outcome !== 'succeeded') await new Promise((resolve) => setTimeout(resolve, 250));
    }
    // The same key from tenant demo is another operation: it runs, in demo's graph.
    expect(contract(await client.callTool({ name: 'create_entities', arguments: { ...entity(name), idempotency_key: key } })).outcome).toBe(
      'succeeded',
    );
    await other.close();
    expect(outcome).toBe('succeeded');
    expect(await entities('other', name)).toBe(1);
    expect(await entities('demo', name)).toBe(1);
  });
});
