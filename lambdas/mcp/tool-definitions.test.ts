import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { InMemoryIdempotencyStore } from 'idempotent-mcp/engine';
import { createToolRuntime, defineReadTool, defineWriteTool, type ToolRuntime, type WriteToolContext } from 'idempotent-mcp/mcp';
import type { AppConfig } from '../config';
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
    const services = {
      ...createToolRuntime({ store: new InMemoryIdempotencyStore(), secret: 's'.repeat(32) }),
      counter: { next: () => 1 },
      auth: { verify: async () => ({ tenant: 'acme', subject: 'agent', scopes: [] }) },
      config: {
        allowedOrigins: [],
        publicBaseUrl: undefined,
        auth: {
          mode: 'dev',
          issuer: 'https://issuer.example',
          requiredScopes: [],
          devAuthDir: '',
          audience: '',
          tenantClaim: 'tenant',
        } satisfies AppConfig['auth'],
        confirmationOptOut: [],
      },
    };
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
