import { randomUUID } from 'node:crypto';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1ClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type AuthInfo, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import * as z from 'zod';
import { createDynamoDbClient, DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import { InMemoryApprovalStore } from 'idempotent-mcp/engine';
import {
  createToolRuntime,
  defineReadTool,
  defineWriteTool,
  getOperationStatusTool,
  issueOperationIdTool,
  registerReadTool,
  registerWriteTool,
  serverInstructions,
  type ToolDefinition,
  type ToolRuntime,
} from 'idempotent-mcp/mcp';
import { createApp } from '../../lambdas/http/app';
import { LIKELY_REPLAY_META_KEY } from '../../lambdas/core/replay-hint';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { countDynamoDbRequests, type RequestCounter } from '../support/dynamodb-request-counter';
import { testAppConfig } from '../support/app-config';
import { startFixtureDownstream, type FixtureDownstream } from '../support/fixture-downstream';
import { OwnServers } from '../support/own-server';

/**
 * A team's own MCP server, on either SDK line (`@modelcontextprotocol/sdk` 1.x, still `latest`, and the v2
 * `@modelcontextprotocol/server`), with its write tool put there by registerWriteTool and the toolkit's
 * get_operation_status by registerReadTool, over real HTTP on DynamoDB Local. The server lets a request without a
 * token through to the tools (optional auth), so the tools themselves must refuse it. The tools act at the fixture
 * downstream (a real HTTP server): what ran is counted in the requests and bookings it holds.
 */

let downstream: FixtureDownstream;
/** Books at the downstream under the call's key: the tool's effect. */
const book = (kind: string, payload: Record<string, unknown>, ctx: { tenant: string; idempotencyKey: string }) =>
  downstream.send({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind, payload });
/** The requests to act under this key that reached the downstream, from any tenant. */
const runsOf = (key: string) => downstream.calls(key);
/** The tenants of the bookings the downstream holds under this key. */
const bookedFor = (key: string) => downstream.bookings(key).map((b) => b.tenant);
const bookRoom = defineWriteTool({
  name: 'book_room',
  title: 'Book a room',
  description: 'Books a meeting room.',
  input: { room: z.string().min(1).max(32), memo: z.string().max(200).optional() },
  result: z.object({ booking_id: z.string(), room: z.string(), memo: z.string().optional() }),
  annotations: { destructiveHint: false, openWorldHint: false },
  async execute(args, ctx) {
    return { result: { booking_id: (await book('room', args, ctx)).booking_id, ...args } };
  },
});
const payInvoice = defineWriteTool({
  name: 'pay_invoice',
  title: 'Pay an invoice',
  description: 'Pays an invoice.',
  input: { invoice_id: z.string().min(1).max(32) },
  result: z.object({ paid: z.boolean() }),
  annotations: { destructiveHint: true, openWorldHint: true },
  keySource: 'operation_id',
  confirmation: 'required',
  summarize: (args) => `Pay invoice ${args.invoice_id}?`,
  async execute(args, ctx) {
    await book('invoice', args, ctx);
    return { result: { paid: true } };
  },
});
const writeTools = [bookRoom, payInvoice];

let services: ToolRuntime;
let store: DynamoDbIdempotencyStore;
let doc: ReturnType<typeof createDynamoDbClient>;
const servers = new OwnServers();

/** The tenant functions a team writes: the one the docs showed before (fails open without this toolkit's check), and the plain one. */
const stringified = (authInfo: AuthInfo | undefined) => String(authInfo?.extra?.tenant);
const plain = (authInfo: AuthInfo | undefined) => authInfo?.extra?.tenant;

/** What both lines get registered: the write tools, and get_operation_status / issue_operation_id answering for them. */
function registerAll(server: Parameters<typeof registerWriteTool>[0]) {
  registerWriteTool(server, bookRoom, { services, tenant: stringified });
  registerWriteTool(server, payInvoice, { services, tenant: plain });
  for (const tool of [getOperationStatusTool, issueOperationIdTool])
    registerReadTool(server, tool, { services, tenant: plain, tools: writeTools });
}
const INSTRUCTIONS = () => serverInstructions([...writeTools, getOperationStatusTool, issueOperationIdTool]);

/** The rooms tools on a 1.x McpServer. */
function roomsV1Server(): V1McpServer {
  const server = new V1McpServer({ name: 'rooms-v1', version: '1.0.0' }, { instructions: INSTRUCTIONS() });
  registerAll(server);
  return server;
}

/** The rooms tools on a v2 McpServer. */
function roomsV2Server(): McpServer {
  const server = new McpServer({ name: 'rooms-v2', version: '1.0.0' }, { instructions: INSTRUCTIONS() });
  registerAll(server);
  return server;
}

interface AnyClient {
  listTools(): Promise<{ tools: Array<{ name: string; inputSchema: Record<string, unknown> }> }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  close(): Promise<void>;
}

async function connect(
  kind: 'v1' | '2025-11-25' | '2026-07-28',
  url: string,
  tenant?: string,
): Promise<{ client: AnyClient; instructions?: string }> {
  const requestInit = { headers: tenant ? { Authorization: `Bearer ${tenant}` } : {} } as RequestInit;
  if (kind === 'v1') {
    const client = new V1Client({ name: 'own-server-test', version: '1' });
    await client.connect(new V1ClientTransport(new URL(url), { requestInit }));
    return { client: client as unknown as AnyClient, instructions: client.getInstructions() };
  }
  const client = new ModernClient(
    { name: 'own-server-test', version: '1' },
    { versionNegotiation: kind === '2026-07-28' ? { mode: { pin: '2026-07-28' } } : { mode: 'legacy' } },
  );
  await client.connect(new ModernTransport(new URL(url), { requestInit }));
  return { client: client as unknown as AnyClient, instructions: client.getInstructions() };
}

type Answer = { isError?: boolean; structuredContent?: Record<string, unknown>; content: Array<{ type: string; text?: string }> };
const call = async (client: AnyClient, name: string, args: Record<string, unknown>) =>
  (await client.callTool({ name, arguments: args })) as Answer;
const newKey = () => `key-${randomUUID()}`;

let urls: Record<'v1' | 'v2', string>;

beforeAll(async () => {
  downstream = await startFixtureDownstream({ holdMs: 1000 });
  doc = createDynamoDbClient({ endpoint: inject('dynamodbEndpoint') });
  const tableName = `own-server-${randomUUID()}`;
  await ensureTable(doc, tableName);
  store = new DynamoDbIdempotencyStore({ client: doc, tableName });
  services = createToolRuntime({ store, secret: randomUUID() + randomUUID() });
  urls = { v1: await servers.v1(roomsV1Server), v2: await servers.v2(roomsV2Server) };
});

afterAll(async () => {
  await servers.close();
  if (doc) doc.destroy();
  await downstream?.stop();
});

const LINES = [
  { line: 'v1', client: 'v1' },
  { line: 'v2', client: '2025-11-25' },
  { line: 'v2', client: '2026-07-28' },
] as const;

describe.each(LINES)('registerWriteTool on a $line McpServer, called by a $client client', ({ line, client: kind }) => {
  it('lists the tools with their strict schemas and instructions that name only the tools served', async () => {
    const { client, instructions } = await connect(kind, urls[line], 'acme');
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual(['book_room', 'get_operation_status', 'issue_operation_id', 'pay_invoice']);
      const book = tools.find((tool) => tool.name === 'book_room')!;
      expect(book.inputSchema).toMatchObject({
        type: 'object',
        additionalProperties: false,
        required: expect.arrayContaining(['idempotency_key', 'room']),
        properties: { idempotency_key: { type: 'string' }, room: { type: 'string' }, memo: { type: 'string' } },
      });
      expect(tools.find((tool) => tool.name === 'pay_invoice')!.inputSchema).toMatchObject({
        additionalProperties: false,
        required: expect.arrayContaining(['operation_id']),
      });
      expect(instructions).toMatch(/get_operation_status/);
      expect(instructions).toMatch(/pay_invoice take an operation_id from issue_operation_id/);
    } finally {
      await client.close();
    }
  });

  it('refuses a call without a verified tenant (even as String(undefined)): nothing runs, nothing is recorded', async () => {
    const { client } = await connect(kind, urls[line]);
    try {
      const key = newKey();
      const answer = await call(client, 'book_room', { idempotency_key: key, room: 'berlin-3' });
      expect(answer).toMatchObject({
        isError: true,
        structuredContent: { outcome: 'rejected', retryable: false, error: { code: 'UNAUTHORIZED' } },
      });
      expect(answer.content[0]!.text).toMatch(/no verified tenant/);
      const status = await call(client, 'get_operation_status', { tool: 'book_room', idempotency_key: key });
      expect(status.isError).toBe(true);
      expect(status.content[0]!.text).toMatch(/^UNAUTHORIZED: /);
      expect(runsOf(key)).toBe(0);
      for (const tenant of ['undefined', 'null', ''])
        expect(await store.get({ tenant, tool: 'book_room', idempotencyKey: key }).catch(() => undefined)).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it('answers invalid arguments with the contract (rejected, INVALID_ARGUMENTS, structured), not the SDK text', async () => {
    const { client } = await connect(kind, urls[line], 'acme');
    try {
      const key = newKey();
      const answer = await call(client, 'book_room', { idempotency_key: key, room: 42 });
      expect(answer).toMatchObject({
        isError: true,
        structuredContent: { outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS', message: expect.stringMatching(/room/) } },
      });
      expect(JSON.stringify(answer)).not.toMatch(/Input validation error/);
      expect(runsOf(key)).toBe(0);
      expect(await store.get({ tenant: 'acme', tool: 'book_room', idempotencyKey: key })).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it('refuses an argument the tool does not declare, naming it; nothing runs, and the key stays free', async () => {
    const { client } = await connect(kind, urls[line], 'acme');
    try {
      const key = newKey();
      const misspelled = await call(client, 'book_room', { idempotency_key: key, room: 'berlin-3', mem: 'projector please' });
      expect(misspelled).toMatchObject({
        isError: true,
        structuredContent: {
          outcome: 'rejected',
          retryable: false,
          error: { code: 'INVALID_ARGUMENTS', message: expect.stringMatching(/mem\b/) },
        },
      });
      expect(runsOf(key)).toBe(0);
      expect(await store.get({ tenant: 'acme', tool: 'book_room', idempotencyKey: key })).toBeUndefined();

      // The corrected call runs once under the same key; its retry replays, and get_operation_status sees it.
      const first = await call(client, 'book_room', { idempotency_key: key, room: 'berlin-3', memo: 'projector please' });
      expect(first.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false, result: { memo: 'projector please' } });
      const again = await call(client, 'book_room', { idempotency_key: key, room: 'berlin-3', memo: 'projector please' });
      expect(again.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.structuredContent!.result });
      expect(runsOf(key)).toBe(1);
      expect(bookedFor(key)).toEqual(['acme']);
      const status = await call(client, 'get_operation_status', { tool: 'book_room', idempotency_key: key });
      expect(status.structuredContent).toMatchObject({ status: 'succeeded', result: first.structuredContent!.result });
    } finally {
      await client.close();
    }
  });
});

describe('registerWriteTool on a 1.x McpServer with a tool that needs confirmation', () => {
  it('answers CONFIRMATION_UNAVAILABLE (the 1.x line cannot ask the person), nothing runs', async () => {
    const { client } = await connect('v1', urls.v1, 'acme');
    try {
      const issued = await call(client, 'issue_operation_id', { tool: 'pay_invoice' });
      const id = (issued.structuredContent as { operation_id: string }).operation_id;
      const answer = await call(client, 'pay_invoice', { operation_id: id, invoice_id: 'inv-1' });
      expect(answer).toMatchObject({
        isError: true,
        structuredContent: { outcome: 'rejected', error: { code: 'CONFIRMATION_UNAVAILABLE' } },
      });
      expect(runsOf(id)).toBe(0);
    } finally {
      await client.close();
    }
  });
});

describe('registerWriteTool on a 1.x McpServer with a tool a person approves (the public approval store)', () => {
  it('gives a 1.x client the approval link as a tool result; nothing runs until the person approved, then the same key runs once', async () => {
    const approvals = new InMemoryApprovalStore();
    const withPage = createToolRuntime({ store, secret: randomUUID() + randomUUID(), approvals, publicBaseUrl: 'https://pay.example.com' });
    const payout = defineWriteTool({
      name: 'send_payout',
      title: 'Send a payout',
      description: 'Sends a payout once a person approved it.',
      input: { amount_minor: z.number().int().positive() },
      result: z.object({ sent: z.boolean() }),
      annotations: { destructiveHint: true, openWorldHint: true },
      confirmation: 'approval',
      summarize: (args) => `Send ${args.amount_minor} cents`,
      async execute(args, ctx) {
        await book('payout', args, ctx);
        return { result: { sent: true } };
      },
    });
    const url = await servers.v1(() => {
      const server = new V1McpServer({ name: 'payouts-v1', version: '1.0.0' });
      registerWriteTool(server, payout, { services: withPage, tenant: plain });
      return server;
    });
    const { client } = await connect('v1', url, 'acme');
    try {
      const key = newKey();
      const args = { idempotency_key: key, amount_minor: 100 };
      const answer = await call(client, 'send_payout', args);
      // A plain result the client shows (no JSON-RPC error a client may hide): the link, and what to do with it.
      expect(answer).toMatchObject({
        isError: false,
        structuredContent: {
          outcome: 'in_progress',
          retryable: true,
          error: { code: 'APPROVAL_REQUIRED' },
          approval_url: expect.stringMatching(/^https:\/\/pay\.example\.com\/approvals\//),
        },
      });
      const link = (answer.structuredContent as { approval_url: string }).approval_url;
      expect(JSON.stringify(answer.content)).toContain(`call again with the same key: ${link}`);
      // Retried before the person decided: the same link, never a run.
      expect((await call(client, 'send_payout', args)).structuredContent).toMatchObject({ approval_url: link });
      expect(runsOf(key)).toBe(0);
      const pending = (await approvals.current({ tenant: 'acme', tool: 'send_payout', idempotencyKey: key }))!;
      expect(pending).toMatchObject({ status: 'pending', mode: 'url' });

      // The person approves (on the team's page, which decides through the store): the same key runs, once.
      expect(await approvals.decide(pending, { status: 'approved', by: 'alice', at: Date.now(), via: 'url' })).toMatchObject({
        applied: true,
      });
      expect(await call(client, 'send_payout', args)).toMatchObject({
        isError: false,
        structuredContent: { outcome: 'succeeded', replayed: false },
      });
      expect(await call(client, 'send_payout', args)).toMatchObject({ structuredContent: { outcome: 'succeeded', replayed: true } });
      expect(runsOf(key)).toBe(1);
    } finally {
      await client.close();
    }
  });
});

describe('registering', () => {
  it('refuses a server it cannot serve, in one sentence naming the SDK versions it needs', () => {
    const notAServer = { tool() {} } as unknown as Parameters<typeof registerWriteTool>[0];
    expect(() => registerWriteTool(notAServer, bookRoom, { services, tenant: plain })).toThrow(
      /^registerWriteTool needs an McpServer of @modelcontextprotocol\/server 2\.x or @modelcontextprotocol\/sdk 1\.23 or later/,
    );
    expect(() => registerReadTool(new McpServer({ name: 'x', version: '1' }), bookRoom, { services, tenant: plain })).toThrow(
      /use registerWriteTool/,
    );
  });
});

describe("the endpoint's server (createApp) around a team's tools", () => {
  const config = testAppConfig;
  const serveTools = (tools: readonly ToolDefinition[]) =>
    servers.listen(
      createApp({ ...services, auth: { verify: async () => ({ tenant: 'acme', subject: 'agent', scopes: [] }) }, config }, { tools }).fetch,
    );
  const getRoom = defineReadTool({
    name: 'get_room',
    title: 'Get a room',
    description: 'Reads a room.',
    input: { room: z.string() },
    result: z.object({ room: z.string() }),
    annotations: { openWorldHint: false },
    execute: async ({ room }) => ({ room }),
  });

  it('adds get_operation_status for its write tools, issue_operation_id only with a tool that takes an operation id, and says only that', async () => {
    for (const [tools, expected] of [
      [[bookRoom], ['book_room', 'get_operation_status']],
      [
        [bookRoom, payInvoice],
        ['book_room', 'get_operation_status', 'issue_operation_id', 'pay_invoice'],
      ],
      [[getRoom], ['get_room']],
    ] as const) {
      const { client, instructions } = await connect('2025-11-25', await serveTools(tools), 'acme');
      try {
        expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(expected);
        if (expected.includes('get_operation_status' as never)) expect(instructions).toMatch(/get_operation_status/);
        else expect(instructions ?? '').not.toMatch(/get_operation_status|idempotency_key/);
        if (!expected.includes('issue_operation_id' as never)) expect(instructions ?? '').not.toMatch(/issue_operation_id|operation_id/);
        else expect(instructions).toMatch(/issue_operation_id/);
      } finally {
        await client.close();
      }
    }
  });

  it("refuses a tools list with a tool named like the toolkit's own, at start", () => {
    const mine = { ...getRoom, name: 'get_operation_status' };
    expect(() =>
      createApp(
        { ...services, auth: { verify: async () => ({ tenant: 'acme', subject: 'a', scopes: [] }) }, config },
        { tools: [bookRoom, mine] },
      ),
    ).toThrow(/get_operation_status is the toolkit's own tool/);
  });
});

describe("a client's replay hint (_meta) reaches the engine on every server path, in both eras", () => {
  /** A local tool: its record and its note commit in one transaction (the one-request path). */
  const noteRoom = defineWriteTool({
    name: 'note_room',
    title: 'Note a room',
    description: 'Notes a room.',
    input: { room: z.string().min(1).max(32) },
    result: z.object({ note_id: z.string(), room: z.string() }),
    annotations: { destructiveHint: false, openWorldHint: false },
    effect: 'local',
    async execute(args, ctx) {
      const noteId = `note_${randomUUID()}`;
      const item = { room: args.room, idempotency_key: ctx.idempotencyKey };
      return {
        result: { note_id: noteId, room: args.room },
        writes: [{ create: { key: { pk: `NOTE#${ctx.tenant}#${noteId}`, sk: 'NOTE' }, item } }],
      };
    },
  });
  const config = testAppConfig;
  let counted: ReturnType<typeof createDynamoDbClient>;
  let requests: RequestCounter;
  let tableName: string;
  beforeAll(async () => {
    counted = createDynamoDbClient({ endpoint: inject('dynamodbEndpoint') });
    requests = countDynamoDbRequests(counted);
    tableName = `own-server-hint-${randomUUID()}`;
    await ensureTable(counted, tableName);
  });
  afterAll(() => counted.destroy());
  /** The notes committed in the table under this key (the tool's whole effect; this describe's table only). */
  const notesOf = async (key: string) => {
    const { Items = [] } = await counted.send(
      new ScanCommand({
        TableName: tableName,
        ConsistentRead: true,
        FilterExpression: 'sk = :note AND idempotency_key = :key',
        ExpressionAttributeValues: { ':note': 'NOTE', ':key': key },
      }),
    );
    return Items.map((item) => ({ tenant: String(item.pk).split('#')[1], room: item.room as string }));
  };

  /** One Lambda container: its own engine (and memory of answered keys) on the shared table. */
  const container = () =>
    createToolRuntime({ store: new DynamoDbIdempotencyStore({ client: counted, tableName }), secret: 's'.repeat(40) });
  const serverPaths: Record<string, (services: ToolRuntime) => Promise<string>> = {
    createApp: (s) =>
      servers.listen(
        createApp({ ...s, auth: { verify: async () => ({ tenant: 'acme', subject: 'agent', scopes: [] }) }, config }, { tools: [noteRoom] })
          .fetch,
      ),
    'registerWriteTool, SDK v2': (s) =>
      servers.v2(() => {
        const server = new McpServer({ name: 'notes-v2', version: '1.0.0' });
        registerWriteTool(server, noteRoom, { services: s, tenant: plain });
        return server;
      }),
    'registerWriteTool, SDK 1.x': (s) =>
      servers.v1(() => {
        const server = new V1McpServer({ name: 'notes-v1', version: '1.0.0' });
        registerWriteTool(server, noteRoom, { services: s, tenant: plain });
        return server;
      }),
  };
  const cases = [
    ['createApp', '2025-11-25'],
    ['createApp', '2026-07-28'],
    ['registerWriteTool, SDK v2', '2025-11-25'],
    ['registerWriteTool, SDK v2', '2026-07-28'],
    ['registerWriteTool, SDK 1.x', 'v1'],
  ] as const;

  it.each(cases)(
    '%s, %s: on another container a hinted replay is one GetItem, a hinted conflict too; unhinted, the refused transaction',
    async (path, era) => {
      const serve = serverPaths[path]!;
      const [first, other, third] = [await serve(container()), await serve(container()), await serve(container())];
      const clientOn = async (url: string) => (await connect(era, url, 'acme')).client;
      const key = newKey();
      const hinted = async (url: string, room: string) =>
        (await (
          await clientOn(url)
        ).callTool({
          name: 'note_room',
          arguments: { room, idempotency_key: key },
          _meta: { [LIKELY_REPLAY_META_KEY]: true },
        } as never)) as Answer;

      const firstAnswer = await call(await clientOn(first), 'note_room', { room: 'blue', idempotency_key: key });
      expect(firstAnswer.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });

      requests.reset();
      expect((await hinted(other, 'blue')).structuredContent).toMatchObject({
        outcome: 'succeeded',
        replayed: true,
        result: firstAnswer.structuredContent!.result,
      });
      expect(requests.byOperation).toEqual({ GetItem: 1 });

      requests.reset();
      expect((await hinted(third, 'red')).structuredContent).toMatchObject({ outcome: 'conflict' });
      expect(requests.byOperation).toEqual({ GetItem: 1 });
      expect(await notesOf(key)).toEqual([{ tenant: 'acme', room: 'blue' }]);

      // The same replay without the hint, on a container that never answered the key: the refused transaction (the
      // one-request path ran the tool for it, and its writes were refused with the record).
      requests.reset();
      expect(
        (await call(await clientOn(await serve(container())), 'note_room', { room: 'blue', idempotency_key: key })).structuredContent,
      ).toMatchObject({
        replayed: true,
      });
      expect(requests.byOperation).toEqual({ TransactWriteItems: 1 });
      expect(await notesOf(key)).toEqual([{ tenant: 'acme', room: 'blue' }]);
    },
  );
});
