import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { afterAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { InMemoryIdempotencyStore } from 'idempotent-mcp/engine';
import {
  createToolRuntime,
  defineReadTool,
  defineWriteTool,
  ReadToolError,
  registerReadTool,
  registerWriteTool,
  type ToolDefinition,
  type ToolRuntime,
  type WriteToolContext,
} from 'idempotent-mcp/mcp';
import { OwnServers } from '../../test/support/own-server';
import { testAppConfig } from '../../test/support/app-config';
import { createApp } from '../http/app';
import { deliveriesOf } from '../functions/consumer-endpoint';

const writeSpec = (name: string) => ({
  name,
  title: 'T',
  description: 'D',
  input: { n: z.number() },
  result: z.object({ n: z.number() }),
  annotations: { destructiveHint: false, openWorldHint: false },
  execute: async (args: { n: number }) => ({ result: args }),
});
const readSpec = (name: string) => ({
  name,
  title: 'T',
  description: 'D',
  input: {},
  result: z.object({}),
  annotations: { openWorldHint: false },
  execute: async () => ({}),
});

describe('a tool name is checked where the tool is defined', () => {
  it.each(['create_order', 'createOrder', 'orders.create', 'a-b', 'x'.repeat(128)])('accepts %s (MCP tool-name charset)', (name) => {
    expect(defineWriteTool(writeSpec(name)).name).toBe(name);
    expect(defineReadTool(readSpec(name)).name).toBe(name);
  });

  it.each(['', 'orders#create', 'create order', 'x'.repeat(129), 'café'])('refuses %j, naming the helper and the charset', (name) => {
    expect(() => defineWriteTool(writeSpec(name))).toThrow(/^defineWriteTool: tool name must be 1 to 128 of A-Z a-z 0-9 _ - \./);
    expect(() => defineReadTool(readSpec(name))).toThrow(/^defineReadTool: tool name must be 1 to 128 of A-Z a-z 0-9 _ - \./);
  });

  it('refuses a missing name', () => {
    expect(() => defineWriteTool({ ...writeSpec('x'), name: undefined as unknown as string })).toThrow(
      /^defineWriteTool: tool name must be/,
    );
  });
});

describe("a tool is typed against the services it needs, and runs on a runtime plus the team's own clients", () => {
  interface CounterServices extends ToolRuntime {
    counter: { next(): number };
  }
  const count = defineWriteTool({
    ...writeSpec('counter.next'),
    input: {},
    result: z.object({ value: z.number() }),
    async execute(_args, ctx: WriteToolContext<CounterServices>) {
      return { result: { value: ctx.services.counter.next() } };
    },
  });

  it('replays the first result to a retry with the same key', async () => {
    let calls = 0;
    const services: CounterServices = {
      ...createToolRuntime({ store: new InMemoryIdempotencyStore(), secret: 's'.repeat(32) }),
      counter: { next: () => ++calls },
    };
    const call = { services, caller: { tenant: 'acme', subject: 'agent', scopes: [] }, tools: new Map([[count.name, count]]) };
    const first = await count.call({ idempotency_key: 'key-00000001' }, call);
    const again = await count.call({ idempotency_key: 'key-00000001' }, call);
    expect(first).toMatchObject({ structuredContent: { outcome: 'succeeded', replayed: false, result: { value: 1 } } });
    expect(again).toMatchObject({ structuredContent: { outcome: 'succeeded', replayed: true, result: { value: 1 } } });
    expect(calls).toBe(1);
  });

  it('serves them over HTTP with only what the app uses: the runtime, a token verifier, the origin and auth settings', async () => {
    const services = { ...appServices(), counter: { next: () => 1 } };
    const app = createApp(services, { tools: [count] });
    const call = await app.request('http://127.0.0.1/mcp', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: 'Bearer any',
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(call.status).toBe(200);
    expect(JSON.stringify(await call.json())).toContain('counter.next');
  });
});

/** What `createApp` uses of the endpoint's services: the runtime, a token verifier (every token is acme's), the settings. */
function appServices() {
  return {
    ...createToolRuntime({ store: new InMemoryIdempotencyStore(), secret: 's'.repeat(32) }),
    auth: { verify: async () => ({ tenant: 'acme', subject: 'agent', scopes: [] }) },
    config: testAppConfig,
  };
}

describe('a tool written by hand refuses a read by throwing ReadToolError from its call (a gateway pass-through read)', () => {
  const servers = new OwnServers();
  afterAll(() => servers.close());
  /** Reads a stock level elsewhere; refuses a tenant it has no account for, fails on anything else. */
  const stock: ToolDefinition = {
    kind: 'read',
    name: 'stock_level',
    title: 'Stock level',
    description: 'Reads the stock level of an item.',
    inputSchema: z.object({ item: z.string() }),
    annotations: { readOnlyHint: true },
    async call(args, call) {
      if (args?.item === 'broken') throw new Error('the stock service is down');
      throw new ReadToolError('NO_ACCOUNT', `no stock account for tenant ${call.caller.tenant}`);
    },
  };

  async function callOn(url: string, item: string) {
    const client = new Client({ name: 'read-refusal-test', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: 'Bearer acme' } } }));
    try {
      return (await client.callTool({ name: 'stock_level', arguments: { item } })) as {
        isError?: boolean;
        content: Array<{ type: string; text?: string }>;
      };
    } finally {
      await client.close();
    }
  }

  it.each([
    ['the endpoint (createApp)', () => servers.listen(createApp(appServices(), { tools: [stock] }).fetch)],
    [
      'your own McpServer (registerReadTool)',
      () =>
        servers.v2(() => {
          const server = new McpServer({ name: 'stock', version: '1' });
          registerReadTool(server, stock, { services: appServices(), tenant: (authInfo) => authInfo?.extra?.tenant });
          return server;
        }),
    ],
  ])("on %s: the read refusal `CODE: message`, as defineReadTool's, and any other error is not one", async (_, serve) => {
    const url = await serve();
    const refused = await callOn(url, 'widget');
    expect(refused.isError).toBe(true);
    expect(refused.content).toEqual([{ type: 'text', text: 'NO_ACCOUNT: no stock account for tenant acme' }]);
    // Only the refusal a tool means is answered as one: another error stays the server's own failure (a JSON-RPC
    // error from the endpoint, the SDK's error result from an McpServer).
    const failed = await callOn(url, 'broken').catch((err: Error) => ({ isError: true, content: [{ type: 'text', text: err.message }] }));
    expect(failed.isError).toBe(true);
    expect(failed.content[0]?.text).toMatch(/the stock service is down/);
    expect(failed.content[0]?.text).not.toMatch(/^[A-Z][A-Z_]*: /);
  });

  // A write tool answers in the result contract (structured, `outcome`), never a read's `CODE: message`: a
  // ReadToolError out of one (a write tool wrapped by hand, as the gateway wraps its keyed writes) is its failure.
  const booking = defineWriteTool(writeSpec('book_stock'));
  const wrapped = {
    ...booking,
    async call(_args: Record<string, unknown> | undefined, call: { caller: { tenant: string } }) {
      throw new ReadToolError('NO_ACCOUNT', `no stock account for tenant ${call.caller.tenant}`);
    },
  };
  it.each([
    ['the endpoint (createApp)', () => servers.listen(createApp(appServices(), { tools: [wrapped] }).fetch)],
    [
      'your own McpServer (registerWriteTool)',
      () =>
        servers.v2(() => {
          const server = new McpServer({ name: 'stock', version: '1' });
          registerWriteTool(server, wrapped, { services: appServices(), tenant: (authInfo) => authInfo?.extra?.tenant });
          return server;
        }),
    ],
  ])('on %s: a ReadToolError out of a write tool is not answered as a read refusal', async (_, serve) => {
    const url = await serve();
    const client = new Client({ name: 'write-refusal-test', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: 'Bearer acme' } } }));
    const answer = await client
      .callTool({ name: 'book_stock', arguments: { n: 1, idempotency_key: 'k-1' } })
      .then((result) => result as { isError?: boolean; content: Array<{ type: string; text?: string }> })
      .catch((err: Error) => ({ isError: true, content: [{ type: 'text', text: err.message }] }))
      .finally(() => client.close());
    expect(answer.isError).toBe(true);
    expect(answer.content[0]?.text).toMatch(/no stock account for tenant acme/);
    expect(answer.content[0]?.text).not.toMatch(/^NO_ACCOUNT: /);
  });
});

describe("a team's deliveries module", () => {
  const deliver = async () => ({ ok: true });

  it('gives its handlers by event type (named export or default)', () => {
    const deliveries = { 'invoice.mail': { deliver } };
    expect(deliveriesOf({ deliveries })).toBe(deliveries);
    expect(deliveriesOf({ default: deliveries })).toBe(deliveries);
  });

  it('fails the cold start saying what the module lacks', () => {
    expect(() => deliveriesOf({})).toThrow(/deliveries module must export `deliveries`: an object of delivery handlers by event type/);
    expect(() => deliveriesOf({ deliveries: [] })).toThrow(/an object of delivery handlers by event type/);
    expect(() => deliveriesOf({ deliveries: { 'invoice.mail': {} } })).toThrow(
      /deliver\(\) for every event type \("invoice.mail" has none\)/,
    );
    expect(() => deliveriesOf({ deliveries: { 'invoice.mail': { deliver, verify: 'yes' } } })).toThrow(/verify\(\) a function/);
  });
});
