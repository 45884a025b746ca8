import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CredentialSource } from '../../lambdas/gateway/credentials';
import { createTestTable } from '../support/dynamodb';
import { startDynamoDbFaultProxy, type DynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { contract, newKey, relayed, relayedCalls, scratch, sdkClient, startTestGateway, type TestGateway } from './support';

/**
 * A write's lookup rides on its claim (issue 46): the gateway writes nothing else before it sends the call. Here the
 * gateway is stopped from recording anything after its claim, as if its process died there, by a DynamoDB that
 * refuses the writes that would: once after the call was sent (the edit applied), once before it was sent. Each
 * record is left PROCESSING with only its claim; the reconciler (every 200 ms here) must answer each truthfully from
 * the lookup on the claim: the first applied (settled, replayed, one effect), the second never sent (released, the
 * retry sends it once). In front of @modelcontextprotocol/server-filesystem (stdio, from the registry), through the
 * relay that counts every `tools/call` it forwards; DynamoDB Local behind a proxy that fails chosen requests.
 */
const policy = {
  tools: {
    edit_file: {
      kind: 'write',
      timeoutMs: 1500,
      inFlightWindowMs: 500,
      reconcile: { tool: 'read_text_file', arguments: { path: '{{path}}' }, found: { textEquals: '{{edits.0.newText}}' } },
    },
    read_text_file: { kind: 'read' },
  },
};

let table: Awaited<ReturnType<typeof createTestTable>>;
let proxy: DynamoDbFaultProxy;
let gateway: TestGateway;
let root: string;
let files: { log: string; faults: string };
let cleanup: () => Promise<void>;
let client: Client;
/** While set, the upstream credential cannot be read: the call stops after its claim, before anything is sent. */
let credentialDown = false;
const credentials: CredentialSource = {
  forTenant: async () => {
    if (credentialDown) throw new Error('the secret cannot be read now');
    return { none: true };
  },
  forListing: async () => ({ none: true }),
};

beforeAll(async () => {
  ({ dir: root, cleanup } = await scratch('claim-lookup'));
  files = {
    log: join(root, '..', `${root.split('/').pop()}-relay.jsonl`),
    faults: join(root, '..', `${root.split('/').pop()}-faults.json`),
  };
  table = await createTestTable();
  proxy = await startDynamoDbFaultProxy(table.endpoint);
  gateway = await startTestGateway({
    policy,
    table,
    credentials,
    argv: relayed(files, 'mcp-server-filesystem', root),
    env: { DYNAMODB_ENDPOINT: proxy.endpoint },
  });
  client = await sdkClient(gateway);
});
afterAll(async () => {
  await client?.close();
  await gateway?.stop();
  await proxy?.stop();
  await table?.drop();
  await cleanup?.();
});

async function target(name: string) {
  const path = join(root, `${name}.txt`);
  await writeFile(path, 'x');
  return { path, edit: { path, edits: [{ oldText: 'x', newText: 'xx' }] } };
}
const callsTo = (path: string) => relayedCalls(files.log).filter((call) => call.name === 'edit_file' && call.arguments.path === path);

/** Calls again with the same key until the answer is settled. */
async function settle(edit: object, key: string) {
  for (let attempt = 0; attempt < 80; attempt++) {
    const answer = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    if (answer.outcome !== 'unknown' && answer.outcome !== 'in_progress') return answer;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`key ${key} never settled`);
}

describe('the lookup on the claim: nothing but the claim written, the reconciler still answers truthfully', () => {
  it('sent and applied, then nothing more recorded: found by the lookup on the claim, replayed; one effect', async () => {
    const { path, edit } = await target('sent');
    const key = newKey();
    // The completion and the mark as unknown (UpdateItem, each tried 3 times by the SDK): as if the gateway died
    // after the send. Only the claim (PutItem) reaches the table.
    proxy.inject({ operation: 'UpdateItem', fault: 'fail', times: 6, bodyIncludes: key });
    const first = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    expect(first.outcome).toBe('unknown');
    expect(await readFile(path, 'utf8')).toBe('xx');
    const settled = await settle(edit, key);
    expect(settled).toMatchObject({ outcome: 'succeeded', result: { settledByLookup: true } });
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });

  it('stopped after the claim, before the send: absent by the lookup on the claim, released; the retry sends it once', async () => {
    const { path, edit } = await target('unsent');
    const key = newKey();
    // Nothing is sent (the credential cannot be read), and the key's release (DeleteItem) does not reach the table:
    // the record stays as claimed.
    credentialDown = true;
    proxy.inject({ operation: 'DeleteItem', fault: 'fail', times: 3, bodyIncludes: key });
    const first = contract(await client.callTool({ name: 'edit_file', arguments: { ...edit, idempotency_key: key } }));
    credentialDown = false;
    expect(first.outcome).toBe('unknown');
    expect(callsTo(path)).toHaveLength(0);
    const settled = await settle(edit, key);
    expect(settled).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(callsTo(path)).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe('xx');
  });
});
