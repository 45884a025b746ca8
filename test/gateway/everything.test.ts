import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotentMcpClient } from 'idempotent-mcp/client';
import { contract, newKey, sdkClient, startEverythingGateway, type EverythingGateway, type HttpRelay, type TestGateway } from './support';

/**
 * The gateway in front of @modelcontextprotocol/server-everything over streamable HTTP (from the registry), through
 * an HTTP relay that records every `tools/call` and every Authorization header that reached the upstream.
 */
const policy = {
  tools: {
    echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000 },
    'get-sum': { kind: 'read' },
  },
};

let setup: EverythingGateway;
let relay: HttpRelay;
let gateway: TestGateway;
let client: Client;

beforeAll(async () => {
  setup = await startEverythingGateway({
    policy,
    credentials: {
      tenants: {
        demo: { header: { name: 'Authorization', value: 'Bearer upstream-credential-of-demo' } },
        other: { header: { name: 'Authorization', value: 'Bearer upstream-credential-of-other' } },
      },
    },
  });
  ({ relay, gateway } = setup);
  client = await sdkClient(gateway);
});
afterAll(async () => {
  await client?.close();
  await setup?.stop();
});

const echoes = (message: string) => setup.echoes(message);

describe('gateway in front of server-everything (streamable HTTP)', () => {
  it('serves only the tools the policy names; another upstream tool is neither listed nor callable', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['echo', 'get-sum', 'get_operation_status']);
    expect(gateway.gateway.hidden).toContain('trigger-long-running-operation');
    await expect(client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 1 } })).rejects.toThrow(
      /Unknown tool/,
    );
    expect(relay.calls.filter((call) => call.name === 'trigger-long-running-operation')).toHaveLength(0);
  });

  it('30 equal calls in parallel reach the upstream once (plain SDK client)', async () => {
    const message = `hello ${newKey()}`;
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } })),
    );
    expect(
      answers.map((answer) => contract(answer).outcome).filter((outcome) => !['succeeded', 'in_progress', 'unknown'].includes(outcome)),
    ).toEqual([]);
    let settled = contract(answers[0]);
    for (let attempt = 0; attempt < 60 && settled.outcome !== 'succeeded'; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      settled = contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } }));
    }
    expect(settled.outcome).toBe('succeeded');
    expect(echoes(message)).toHaveLength(1);
  });

  it('30 equal calls in parallel reach the upstream once (our client)', async () => {
    const ours = new IdempotentMcpClient({
      url: gateway.mcpUrl,
      token: await gateway.tokenFor('demo'),
      retry: { maxAttempts: 40, maxDelayMs: 500 },
    });
    const message = `hello ${newKey()}`;
    const calls = await Promise.all(Array.from({ length: 30 }, () => ours.callWrite({ tool: 'echo', args: { message }, intent: message })));
    await ours.close();
    expect(calls.map((call) => call.result?.outcome)).toEqual(Array(30).fill('succeeded'));
    expect(echoes(message)).toHaveLength(1);
  });

  it('the same key with other arguments is a conflict, and nothing is sent', async () => {
    const key = newKey();
    const message = `first ${key}`;
    expect(contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } })).outcome).toBe('succeeded');
    const answer = contract(await client.callTool({ name: 'echo', arguments: { message: `second ${key}`, idempotency_key: key } }));
    expect(answer.outcome).toBe('conflict');
    expect(echoes(`second ${key}`)).toHaveLength(0);
  });

  it("the upstream sees the gateway's credential for the caller's tenant, never the agent's token", async () => {
    const demoToken = await gateway.tokenFor('demo');
    const otherToken = await gateway.tokenFor('other');
    const other = await sdkClient(gateway, 'other');
    const message = `tenant other ${newKey()}`;
    const key = newKey();
    // Its first call opens the gateway's connection for that credential: under load it may answer unknown first.
    let outcome = '';
    for (let attempt = 0; attempt < 60 && outcome !== 'succeeded'; attempt++) {
      outcome = contract(await other.callTool({ name: 'echo', arguments: { message, idempotency_key: key } })).outcome;
      if (outcome !== 'succeeded') await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(outcome).toBe('succeeded');
    await other.close();
    expect(echoes(message).map((call) => call.authorization)).toEqual(['Bearer upstream-credential-of-other']);
    expect(
      relay.calls.filter((call) => call.name === 'echo').every((call) => call.authorization?.startsWith('Bearer upstream-credential-of-')),
    ).toBe(true);
    for (const seen of relay.authorizations) {
      expect(seen).not.toContain(demoToken);
      expect(seen).not.toContain(otherToken);
    }
  });

  it('a tenant without a credential is refused, and nothing is sent', async () => {
    const stranger = await sdkClient(gateway, 'stranger');
    const message = `stranger ${newKey()}`;
    const answer = contract(await stranger.callTool({ name: 'echo', arguments: { message, idempotency_key: newKey() } }));
    await stranger.close();
    expect(answer).toMatchObject({ outcome: 'failed', error: { code: 'UNAUTHORIZED' } });
    expect(echoes(message)).toHaveLength(0);
  });

  it('reads pass through unchanged', async () => {
    const answer = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
    expect(JSON.stringify(answer.content)).toContain('5');
  });
});
