import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { REGISTRY_SERVERS } from './registry-servers';
import { contract, newKey, scratch, sdkClient, startTestGateway } from './support';

/**
 * server-memory's README sets MEMORY_FILE_PATH in its process's environment: the policy's `env` gives it to the stdio
 * process the gateway starts (no credentials file), and the graph lands in that file, not in the package's folder.
 */
it("the policy's env reaches a stdio upstream: server-memory keeps its graph where MEMORY_FILE_PATH says", async () => {
  const { dir, cleanup } = await scratch('memory-env');
  const file = join(dir, 'graph.jsonl');
  const policy = { env: { MEMORY_FILE_PATH: file }, tools: { create_entities: { kind: 'write', inFlightWindowMs: 0 } } };
  const gateway = await startTestGateway({ policy, argv: ['--', process.execPath, REGISTRY_SERVERS['mcp-server-memory']] });
  const client = await sdkClient(gateway);
  try {
    const name = `env-${newKey()}`;
    const answer = await client.callTool({
      name: 'create_entities',
      arguments: { idempotency_key: newKey(), entities: [{ name, entityType: 'customer', observations: [] }] },
    });
    expect(contract(answer).outcome).toBe('succeeded');
    expect(await readFile(file, 'utf8')).toContain(name);
  } finally {
    await client.close();
    await gateway.stop();
    await cleanup();
  }
});
