import { randomUUID } from 'node:crypto';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type AuthInfo, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import * as z from 'zod';
import { createDynamoDbClient, DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import {
  createToolRuntime,
  defineWriteTool,
  getOperationStatusTool,
  issueOperationIdTool,
  registerReadTool,
  registerWriteTool,
  type ToolRuntime,
} from 'idempotent-mcp/mcp';
import { stderrLogger } from '../../lambdas/observability/logger';
import { testAppConfig } from '../support/app-config';
import { hashForLog } from '../../lambdas/core/idempotency-key';
import { createApp } from '../../lambdas/http/app';
import { OwnServers } from '../support/own-server';
import { callWrite, connectModernClient, keyHeaders, MODERN_PROTOCOL } from '../support/mcp';
import {
  FixtureTool,
  fixturePaymentArgs as paymentArgs,
  startFixtureDownstream,
  startFixtureStack,
  type FixtureDownstream,
  type FixtureStack,
} from '../support/fixture-tools';

/**
 * MCP 2026-07-28 lets a tool mark arguments with `x-mcp-header` so that clients send them again as `Mcp-Param-*`
 * HTTP headers, and makes the server refuse a call whose header and argument disagree (or whose header is missing
 * while the argument is there): 400, JSON-RPC -32020 HeaderMismatch. Write tools mark their key. Here: what the v2
 * client sends, what the endpoint refuses (with nothing recorded and nothing sent downstream), that the endpoint's
 * low-level server answers exactly as the SDK's own McpServer does on the same requests, and that 2025-era requests
 * are not affected.
 */

const META = {
  'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'key-header-test', version: '1' },
};
const newKey = () => `key-${randomUUID()}`;
/** `=?base64?…?=`, the spec's wrapping of a header value that is not plain ASCII. */
const base64Header = (value: string) => `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;

type Answer = {
  status: number;
  error?: { code: number; message: string; data?: { mismatch?: { header: string; body: string } } };
  result?: Record<string, any>;
  id?: unknown;
};

/** Reads a JSON-RPC answer, in JSON or as the one message of an SSE stream (the SDK's 2025-era leg streams). */
async function answerOf(response: Response): Promise<Answer> {
  const text = await response.text();
  const json = response.headers.get('content-type')?.startsWith('text/event-stream')
    ? text
        .split('\n')
        .find((line) => line.startsWith('data: '))!
        .slice('data: '.length)
    : text;
  return { status: response.status, ...(JSON.parse(json) as Omit<Answer, 'status'>) };
}

/** One raw 2026-07-28 tools/call with exactly these extra headers. */
async function modernCall(
  url: string,
  bearer: string,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<Answer> {
  return answerOf(
    await fetch(url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${bearer}`,
        'Mcp-Method': 'tools/call',
        'Mcp-Name': name,
        'Mcp-Protocol-Version': MODERN_PROTOCOL,
        ...headers,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name, arguments: args, _meta: META } }),
    }),
  );
}

/** One raw 2025-11-25 tools/call (stateless, no handshake: the header names the version), with these extra headers. */
async function legacyCall(
  url: string,
  bearer: string,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<Answer> {
  return answerOf(
    await fetch(url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${bearer}`,
        'Mcp-Protocol-Version': '2025-11-25',
        ...headers,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 12, method: 'tools/call', params: { name, arguments: args } }),
    }),
  );
}

/** The HeaderMismatch answer, naming the header. */
const headerMismatch = (header: string) => ({
  status: 400,
  id: 11,
  error: {
    code: -32020,
    message: expect.stringMatching(/^Bad Request: the request headers and body disagree: /),
    data: { mismatch: { header, body: expect.any(String) } },
  },
});

/** A fetch that remembers the headers of every tools/call it sends, and the status of its answer. */
function recordingFetch() {
  const calls: Array<{ headers: Headers; status: number }> = [];
  const record: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: string }) : undefined;
    if (body?.method === 'tools/call') calls.push({ headers: new Headers(init?.headers), status: response.status });
    return response;
  };
  return { calls, fetch: record };
}

// The toolkit's behaviour on the fixture tools (fixture_write keyed by idempotency_key, fixture_payment by
// operation_id), counted in the fixture downstream and the table; the reference endpoint's tools are not served here
// (test/integration/mcp-create-order.test.ts checks that each of them is listed with its key marked).
describe('the endpoint (local stack, fixture tools, DynamoDB Local, fixture downstream)', () => {
  let stack: FixtureStack;
  let token: string;
  const TENANT = 'tenant-key-header';
  const WRITE = FixtureTool.write;
  const PAY = FixtureTool.payment;
  const writeArgs = (key: string) => ({ idempotency_key: key, note: 'mirrored' });
  const writeRecord = (key: string) => stack.services.store.get({ tenant: TENANT, tool: WRITE, idempotencyKey: key });
  /** What the downstream holds under the key (whatever the endpoint answered). */
  const bookingsOf = async (key: string) => stack.downstream.bookings(key);

  beforeAll(async () => {
    // No background workers: nothing here queues an event or leaves a call to settle.
    stack = await startFixtureStack({ workers: { reconcilerTimer: false, relayPoller: false, consumerPoller: false } });
    token = await stack.tokenFor(TENANT);
  });
  afterAll(() => stack?.stop());

  it('lists each write tool with its key marked for mirroring: Mcp-Param-Idempotency-Key, Mcp-Param-Operation-Id', async () => {
    const client = await connectModernClient(stack, TENANT);
    try {
      const { tools } = await client.listTools();
      const keyOf = (name: string) =>
        tools.find((tool) => tool.name === name)!.inputSchema.properties as Record<string, Record<string, unknown>>;
      // A key tool, a local-effect one, an outbox one and an operation-id tool.
      for (const name of [WRITE, FixtureTool.order, FixtureTool.notify])
        expect(keyOf(name).idempotency_key, name).toMatchObject({ type: 'string', 'x-mcp-header': 'Idempotency-Key' });
      expect(keyOf(PAY).operation_id).toMatchObject({ type: 'string', 'x-mcp-header': 'Operation-Id' });
      expect(keyOf(PAY)).not.toHaveProperty('idempotency_key');
      // The client keeps every tool: none carries a declaration the spec makes it drop.
      expect(tools.map((tool) => tool.name).sort()).toEqual(
        [...Object.values(FixtureTool), 'get_operation_status', 'issue_operation_id'].sort(),
      );
    } finally {
      await client.close();
    }
  });

  it('the v2 client mirrors the key into Mcp-Param-Idempotency-Key by itself: the call runs once, its retry replays', async () => {
    const recorder = recordingFetch();
    const client = await connectModernClient(stack, TENANT, { fetch: recorder.fetch });
    try {
      const key = newKey();
      expect(await callWrite(client, WRITE, writeArgs(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(await callWrite(client, WRITE, writeArgs(key))).toMatchObject({ outcome: 'succeeded', replayed: true });
      expect(recorder.calls.map((call) => [call.status, call.headers.get('mcp-param-idempotency-key')])).toEqual([
        [200, key],
        [200, key],
      ]);
      expect(await bookingsOf(key)).toHaveLength(1);
      // The retry never reached the downstream.
      expect(stack.downstream.calls(key)).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('a v2 client that has not listed the tools is refused once, lists them and calls again with the header: one booking', async () => {
    const recorder = recordingFetch();
    const client = new ModernClient({ name: 'unlisted', version: '1' }, { versionNegotiation: { mode: { pin: MODERN_PROTOCOL } } });
    await client.connect(
      new ModernTransport(new URL(stack.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } }, fetch: recorder.fetch }),
    );
    try {
      const key = newKey();
      expect(await callWrite(client, WRITE, writeArgs(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(recorder.calls.map((call) => [call.status, call.headers.get('mcp-param-idempotency-key')])).toEqual([
        [400, null],
        [200, key],
      ]);
      expect(await bookingsOf(key)).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('a key header that disagrees with idempotency_key: 400 / -32020, no record under either key, no booking; the key stays free', async () => {
    const info = vi.spyOn(stack.services.logger, 'info');
    const callsBefore = stack.downstream.calls();
    const key = newKey();
    const other = newKey();
    try {
      expect(await modernCall(stack.mcpUrl, token, WRITE, writeArgs(key), { 'Mcp-Param-Idempotency-Key': other })).toMatchObject(
        headerMismatch('Mcp-Param-Idempotency-Key'),
      );
      expect(await writeRecord(key)).toBeUndefined();
      expect(await writeRecord(other)).toBeUndefined();
      expect(await bookingsOf(key)).toEqual([]);
      expect(await bookingsOf(other)).toEqual([]);
      expect(stack.downstream.calls()).toBe(callsBefore);
      // The log says which header and why, with both values hashed as the key is everywhere else, never raw.
      const lines = info.mock.calls.filter(([message]) => message === 'mcp request refused');
      expect(lines.map(([, fields]) => fields)).toEqual([
        expect.objectContaining({
          reason: 'header mismatch',
          tool: WRITE,
          tenant: TENANT,
          header: 'Mcp-Param-Idempotency-Key',
          problem: 'mismatch',
          value_hash: hashForLog(key),
          header_value_hash: hashForLog(other),
        }),
      ]);
      expect(JSON.stringify(info.mock.calls)).not.toContain(key);
      expect(JSON.stringify(info.mock.calls)).not.toContain(other);
    } finally {
      info.mockRestore();
    }
    // Nothing was recorded: the same key, mirrored, runs now.
    expect(
      (await modernCall(stack.mcpUrl, token, WRITE, writeArgs(key), keyHeaders({ idempotency_key: key }))).result?.structuredContent,
    ).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
    });
    expect(await bookingsOf(key)).toHaveLength(1);
  });

  it('no key header while idempotency_key is there: 400 / -32020, nothing recorded, no booking', async () => {
    const key = newKey();
    expect(await modernCall(stack.mcpUrl, token, WRITE, writeArgs(key), {})).toMatchObject(headerMismatch('Mcp-Param-Idempotency-Key'));
    expect(await writeRecord(key)).toBeUndefined();
    expect(await bookingsOf(key)).toEqual([]);
    expect(stack.downstream.calls(key)).toBe(0);
  });

  it('an Mcp-Param-Operation-Id that disagrees with operation_id: 400 / -32020, nothing recorded, no booking', async () => {
    const client = await connectModernClient(stack, TENANT);
    try {
      const issued = (await client.callTool({ name: 'issue_operation_id', arguments: { tool: PAY } })).structuredContent as {
        operation_id: string;
      };
      const id = issued.operation_id;
      expect(await modernCall(stack.mcpUrl, token, PAY, paymentArgs(id), { 'Mcp-Param-Operation-Id': `${id}x` })).toMatchObject(
        headerMismatch('Mcp-Param-Operation-Id'),
      );
      expect(await modernCall(stack.mcpUrl, token, PAY, paymentArgs(id), {})).toMatchObject(headerMismatch('Mcp-Param-Operation-Id'));
      expect(await stack.services.store.get({ tenant: TENANT, tool: PAY, idempotencyKey: id })).toBeUndefined();
      expect(stack.downstream.calls(id)).toBe(0);
      expect(stack.downstream.bookings(id)).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('2025-era requests are not affected: a 1.x client sends no header and books; a stray header is not read', async () => {
    const recorder = recordingFetch();
    const client = new V1Client({ name: 'v1', version: '1' });
    await client.connect(
      new V1Transport(new URL(stack.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } }, fetch: recorder.fetch }),
    );
    try {
      const key = newKey();
      expect(await callWrite(client, WRITE, writeArgs(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(recorder.calls.map((call) => call.headers.get('mcp-param-idempotency-key'))).toEqual([null]);
      expect(await bookingsOf(key)).toHaveLength(1);
    } finally {
      await client.close();
    }
    // Those revisions define no such header: the body's key is the key.
    const key = newKey();
    const answer = await legacyCall(stack.mcpUrl, token, WRITE, writeArgs(key), { 'Mcp-Param-Idempotency-Key': newKey() });
    expect(answer).toMatchObject({ status: 200, result: { structuredContent: { outcome: 'succeeded', idempotency_key: key } } });
    expect(await bookingsOf(key)).toHaveLength(1);
  });
});

describe("the endpoint's server and the SDK's McpServer answer the same requests alike", () => {
  // What ran is what reached the fixture downstream: each run sends it one request under the tenant and key.
  let downstream: FixtureDownstream;
  const ran = (tenant: string, key: string) => {
    expect(downstream.bookings(key).map((booking) => booking.tenant)).toEqual(downstream.calls(key) ? [tenant] : []);
    return downstream.calls(key);
  };
  const book = (kind: string, args: Record<string, unknown>, ctx: { tenant: string; idempotencyKey: string }) =>
    downstream.send({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind, payload: args });
  const result = z.object({ label: z.string() });
  // The test's own tools: a key plus a team's own mirrored arguments (a string that may be non-ASCII, an integer).
  const tagNote = defineWriteTool({
    name: 'tag_note',
    title: 'Tag a note',
    description: 'Tags a note.',
    input: {
      label: z.string().min(1).max(64).meta({ 'x-mcp-header': 'Label' }),
      count: z.number().int().min(0).max(1000).meta({ 'x-mcp-header': 'Count' }).optional(),
    },
    result,
    annotations: { destructiveHint: false, openWorldHint: false },
    async execute(args, ctx) {
      await book('tag_note', args, ctx);
      return { result: { label: args.label } };
    },
  });
  const tagPayment = defineWriteTool({
    name: 'tag_payment',
    title: 'Tag a payment',
    description: 'Tags a payment.',
    input: { label: z.string().min(1).max(64) },
    result,
    keySource: 'operation_id',
    annotations: { destructiveHint: true, openWorldHint: false },
    async execute(args, ctx) {
      await book('tag_payment', args, ctx);
      return { result: { label: args.label } };
    },
  });
  const tools = [tagNote, tagPayment];

  const servers = new OwnServers();
  const logLines: string[] = [];
  let doc: ReturnType<typeof createDynamoDbClient>;
  let store: DynamoDbIdempotencyStore;
  let services: ToolRuntime;
  let urls: { ours: string; sdk: string };

  beforeAll(async () => {
    downstream = await startFixtureDownstream({ holdMs: 1000 });
    doc = createDynamoDbClient({ endpoint: inject('dynamodbEndpoint') });
    const tableName = `key-header-${randomUUID()}`;
    await ensureTable(doc, tableName);
    store = new DynamoDbIdempotencyStore({ client: doc, tableName });
    services = createToolRuntime({
      store,
      secret: randomUUID() + randomUUID(),
      logger: stderrLogger({ level: 'DEBUG', write: (line) => logLines.push(line) }),
    });
    const config = testAppConfig;
    // Bearer <tenant>, as the team server's toy auth reads it.
    const auth = {
      verify: async (header: string | undefined) => ({ tenant: String(header).replace(/^Bearer /, ''), subject: 'agent', scopes: [] }),
    };
    const tenant = (authInfo: AuthInfo | undefined) => authInfo?.extra?.tenant;
    const sdkServer = () => {
      const server = new McpServer({ name: 'tags', version: '1' });
      for (const tool of tools) registerWriteTool(server, tool, { services, tenant });
      for (const tool of [getOperationStatusTool, issueOperationIdTool]) registerReadTool(server, tool, { services, tenant, tools });
      return server;
    };
    urls = { ours: await servers.listen(createApp({ ...services, auth, config }, { tools }).fetch), sdk: await servers.v2(sdkServer) };
  });
  afterAll(async () => {
    await servers.close();
    await downstream?.stop();
    if (doc) doc.destroy();
  });

  /** What a client can tell apart: the HTTP status, the JSON-RPC error and the header it names, or the outcome. */
  const shape = (answer: Answer) => ({
    status: answer.status,
    error: answer.error && { code: answer.error.code, header: answer.error.data?.mismatch?.header },
    outcome: answer.result?.structuredContent?.outcome,
  });
  const REFUSED = (header: string) => ({ status: 400, error: { code: -32020, header }, outcome: undefined });
  const RAN = { status: 200, error: undefined, outcome: 'succeeded' };

  const CASES: Array<{
    what: string;
    args: (key: string) => Record<string, unknown>;
    headers: (key: string) => Record<string, string>;
    expected: ReturnType<typeof shape>;
  }> = [
    {
      what: 'key and label mirrored as they are',
      args: (key) => ({ idempotency_key: key, label: 'us-west1' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': 'us-west1' }),
      expected: RAN,
    },
    {
      what: 'a key header that disagrees',
      args: (key) => ({ idempotency_key: key, label: 'a' }),
      headers: () => ({ 'Mcp-Param-Idempotency-Key': newKey(), 'Mcp-Param-Label': 'a' }),
      expected: REFUSED('Mcp-Param-Idempotency-Key'),
    },
    {
      what: 'no key header',
      args: (key) => ({ idempotency_key: key, label: 'a' }),
      headers: () => ({ 'Mcp-Param-Label': 'a' }),
      expected: REFUSED('Mcp-Param-Idempotency-Key'),
    },
    {
      what: 'the key Base64-wrapped',
      args: (key) => ({ idempotency_key: key, label: 'a' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': base64Header(key), 'Mcp-Param-Label': 'a' }),
      expected: RAN,
    },
    // The spec's own example: "Hello, 世界" travels as =?base64?SGVsbG8sIOS4lueVjA==?=.
    {
      what: 'a non-ASCII label, Base64-wrapped',
      args: (key) => ({ idempotency_key: key, label: 'Hello, 世界' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': '=?base64?SGVsbG8sIOS4lueVjA==?=' }),
      expected: RAN,
    },
    {
      what: 'a non-ASCII label, the Base64 of another value',
      args: (key) => ({ idempotency_key: key, label: 'Hello, 世界' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': base64Header('Hello, world') }),
      expected: REFUSED('Mcp-Param-Label'),
    },
    {
      what: 'a non-ASCII label with no header',
      args: (key) => ({ idempotency_key: key, label: 'Hello, 世界' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key }),
      expected: REFUSED('Mcp-Param-Label'),
    },
    {
      what: 'a sentinel that is not canonical Base64',
      args: (key) => ({ idempotency_key: key, label: 'a' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': '=?base64?YQ?=' }),
      expected: REFUSED('Mcp-Param-Label'),
    },
    {
      what: 'an integer sent as 42.0 (compared as a number)',
      args: (key) => ({ idempotency_key: key, label: 'a', count: 42 }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': 'a', 'Mcp-Param-Count': '42.0' }),
      expected: RAN,
    },
    {
      what: 'an integer header that disagrees',
      args: (key) => ({ idempotency_key: key, label: 'a', count: 42 }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': 'a', 'Mcp-Param-Count': '43' }),
      expected: REFUSED('Mcp-Param-Count'),
    },
    {
      what: 'a header whose argument is absent (not read)',
      args: (key) => ({ idempotency_key: key, label: 'a' }),
      headers: (key) => ({ 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': 'a', 'Mcp-Param-Count': '7' }),
      expected: RAN,
    },
  ];

  describe.each(['ours', 'sdk'] as const)('%s', (server) => {
    it.each(CASES)('$what', async ({ args, headers, expected }) => {
      const tenant = `t-${server}`;
      const key = newKey();
      const answer = await modernCall(urls[server], tenant, 'tag_note', args(key), headers(key));
      expect(shape(answer)).toEqual(expected);
      // Refused: nothing ran and no record was written; the key is free for the call sent right.
      expect(ran(tenant, key)).toBe(expected.status === 200 ? 1 : 0);
      expect(Boolean(await store.get({ tenant, tool: 'tag_note', idempotencyKey: key }))).toBe(expected.status === 200);
    });

    it('an operation id whose Mcp-Param-Operation-Id disagrees, or is missing: refused, nothing recorded; mirrored, it runs', async () => {
      const tenant = `t-${server}-op`;
      const issued = await modernCall(urls[server], tenant, 'issue_operation_id', { tool: 'tag_payment' }, {});
      const id = issued.result!.structuredContent.operation_id as string;
      const args = { operation_id: id, label: 'x' };
      expect(shape(await modernCall(urls[server], tenant, 'tag_payment', args, { 'Mcp-Param-Operation-Id': `${id}x` }))).toEqual(
        REFUSED('Mcp-Param-Operation-Id'),
      );
      expect(shape(await modernCall(urls[server], tenant, 'tag_payment', args, {}))).toEqual(REFUSED('Mcp-Param-Operation-Id'));
      expect(await store.get({ tenant, tool: 'tag_payment', idempotencyKey: id })).toBeUndefined();
      expect(ran(tenant, id)).toBe(0);
      expect(shape(await modernCall(urls[server], tenant, 'tag_payment', args, { 'Mcp-Param-Operation-Id': id }))).toEqual(RAN);
      expect(ran(tenant, id)).toBe(1);
    });

    it('the v2 client mirrors the key and a non-ASCII label (Base64-wrapped) by itself', async () => {
      const tenant = `t-${server}-client`;
      const recorder = recordingFetch();
      const client = new ModernClient({ name: 'mirror', version: '1' }, { versionNegotiation: { mode: { pin: MODERN_PROTOCOL } } });
      await client.connect(
        new ModernTransport(new URL(urls[server]), {
          requestInit: { headers: { Authorization: `Bearer ${tenant}` } },
          fetch: recorder.fetch,
        }),
      );
      try {
        await client.listTools();
        const key = newKey();
        expect(await callWrite(client, 'tag_note', { idempotency_key: key, label: 'Hello, 世界', count: 3 })).toMatchObject({
          outcome: 'succeeded',
        });
        const [sent] = recorder.calls;
        expect([
          sent!.status,
          sent!.headers.get('mcp-param-idempotency-key'),
          sent!.headers.get('mcp-param-label'),
          sent!.headers.get('mcp-param-count'),
        ]).toEqual([200, key, '=?base64?SGVsbG8sIOS4lueVjA==?=', '3']);
        expect(ran(tenant, key)).toBe(1);
      } finally {
        await client.close();
      }
    });

    it('a 2025-11-25 request is not checked: no header, or one that disagrees, and the body key runs', async () => {
      const tenant = `t-${server}-legacy`;
      for (const headers of [{}, { 'Mcp-Param-Idempotency-Key': newKey(), 'Mcp-Param-Label': 'other' }] as Array<Record<string, string>>) {
        const key = newKey();
        const answer = await legacyCall(urls[server], tenant, 'tag_note', { idempotency_key: key, label: 'a' }, headers);
        expect(shape(answer)).toEqual(RAN);
        expect(answer.result!.structuredContent.idempotency_key).toBe(key);
        expect(ran(tenant, key)).toBe(1);
      }
    });
  });

  it("a browser's CORS preflight allows every header the v2 client sends: a tool's own Mcp-Param-* as well as the key's", async () => {
    const tenant = 't-ours-preflight';
    const recorder = recordingFetch();
    const client = new ModernClient({ name: 'mirror', version: '1' }, { versionNegotiation: { mode: { pin: MODERN_PROTOCOL } } });
    await client.connect(
      new ModernTransport(new URL(urls.ours), { requestInit: { headers: { Authorization: `Bearer ${tenant}` } }, fetch: recorder.fetch }),
    );
    try {
      await client.listTools();
      expect(await callWrite(client, 'tag_note', { idempotency_key: newKey(), label: 'a', count: 3 })).toMatchObject({
        outcome: 'succeeded',
      });
    } finally {
      await client.close();
    }
    // What a browser would ask before sending that request from another origin (header names lower-cased, as it does).
    const sent = [...recorder.calls[0]!.headers.keys()];
    expect(sent).toEqual(
      expect.arrayContaining(['mcp-method', 'mcp-name', 'mcp-param-idempotency-key', 'mcp-param-label', 'mcp-param-count']),
    );
    const preflight = await fetch(urls.ours, {
      method: 'OPTIONS',
      headers: {
        Origin: 'http://localhost:6274',
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': sent.sort().join(','),
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('http://localhost:6274');
    const allowed = (preflight.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    expect(sent.filter((name) => !allowed.includes(name))).toEqual([]);
  });

  it('the same refused request gets the same status, code, header and id from both (the message of ours names no value)', async () => {
    const key = newKey();
    const other = newKey();
    const [ours, sdk] = await Promise.all(
      (['ours', 'sdk'] as const).map((server) =>
        modernCall(urls[server], 'same', 'tag_note', { idempotency_key: key, label: 'a' }, { 'Mcp-Param-Idempotency-Key': other }),
      ),
    );
    const wire = (answer: Answer) => ({
      status: answer.status,
      id: answer.id,
      code: answer.error?.code,
      header: answer.error?.data?.mismatch?.header,
      prefix: answer.error?.message.split(': ')[0],
    });
    expect(wire(ours!)).toEqual(wire(sdk!));
    expect(wire(ours!)).toEqual({ status: 400, id: 11, code: -32020, header: 'Mcp-Param-Idempotency-Key', prefix: 'Bad Request' });
    expect(ours!.error!.message).toBe(
      'Bad Request: the request headers and body disagree: the Mcp-Param-Idempotency-Key header does not match idempotency_key in the body',
    );
    expect(JSON.stringify(ours)).not.toContain(key);
    expect(JSON.stringify(ours)).not.toContain(other);
    // The log line of ours: the header, the tool, both values hashed.
    const refused = logLines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.message === 'mcp request refused' && line.value_hash === hashForLog(key));
    expect(refused).toEqual([
      expect.objectContaining({
        header: 'Mcp-Param-Idempotency-Key',
        tool: 'tag_note',
        problem: 'mismatch',
        header_value_hash: hashForLog(other),
      }),
    ]);
    expect(logLines.join('\n')).not.toContain(key);
  });

  it('a plain header value with characters a header may not carry is refused by ours (the spec says so; SDK 2.4.0 compares it as it is)', async () => {
    const tenant = 't-ours-latin1';
    const key = newKey();
    // Node sends and reads header bytes as Latin-1: "ü" arrives as "ü", outside the visible ASCII a value may hold.
    const answer = await modernCall(
      urls.ours,
      tenant,
      'tag_note',
      { idempotency_key: key, label: 'grün' },
      { 'Mcp-Param-Idempotency-Key': key, 'Mcp-Param-Label': 'grün' },
    );
    expect(shape(answer)).toEqual(REFUSED('Mcp-Param-Label'));
    expect(ran(tenant, key)).toBe(0);
    expect(await store.get({ tenant, tool: 'tag_note', idempotencyKey: key })).toBeUndefined();
  });
});
