import { randomUUID } from 'node:crypto';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { type AuthInfo, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import * as z from 'zod';
import { createDynamoDbClient, DynamoDbApprovalStore, DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import { createToolRuntime, defineWriteTool, registerWriteTool, type ToolRuntime } from 'idempotent-mcp/mcp';
import { parseApprovalId } from '../../lambdas/confirmation/core/approval';
import { startFixtureDownstream, type FixtureDownstream } from '../support/fixture-downstream';
import { OwnServers } from '../support/own-server';

/**
 * A key whose settled record's retention ended (`onExpired: 'execute'`, the default) is free again: a call with it is
 * a new operation, and a tool a person confirms asks them again before it runs, on the page ('approval') or in the
 * form ('required'), never on the strength of the first run's yes. Over MCP 2026-07-28 (the v2 SDK client answering
 * the input requests) to a team's own server, on DynamoDB Local, whose expired records stay on the table. The tools
 * act at the fixture downstream: its requests under a key say how often a tool ran.
 */
const RETENTION_SECONDS = 60;
const TENANT = 'tenant-expiry';
let aheadMs = 0;
let downstream: FixtureDownstream;
/** Books at the downstream under the call's key (the provider answers a repeat with its first booking). */
const act = async (kind: string, args: Record<string, unknown>, ctx: { tenant: string; idempotencyKey: string }) => {
  const booking = await downstream.send({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind, payload: args });
  return { result: { booking_id: booking.booking_id } };
};
/** How often the tools asked the downstream to act under this key. */
const runsOf = (key: string) => downstream.calls(key);

const sendPayout = defineWriteTool({
  name: 'send_payout',
  title: 'Send a payout',
  description: 'Sends a payout once a person approved it.',
  input: { amount_minor: z.number().int().positive() },
  result: z.object({ booking_id: z.string() }),
  annotations: { destructiveHint: true, openWorldHint: true },
  idempotency: { retentionSeconds: RETENTION_SECONDS },
  confirmation: 'approval',
  summarize: (args) => `Send ${args.amount_minor} cents`,
  execute: (args, ctx) => act('payout', args, ctx),
});
const publishPost = defineWriteTool({
  name: 'publish_post',
  title: 'Publish a post',
  description: 'Publishes a post once the person confirmed it.',
  input: { title: z.string().min(1).max(64) },
  result: z.object({ booking_id: z.string() }),
  annotations: { destructiveHint: false, openWorldHint: true },
  idempotency: { retentionSeconds: RETENTION_SECONDS },
  confirmation: 'required',
  summarize: (args) => `Publish "${args.title}"`,
  execute: (args, ctx) => act('post', args, ctx),
});

let doc: ReturnType<typeof createDynamoDbClient>;
let approvals: DynamoDbApprovalStore;
let url: string;
const servers = new OwnServers();

beforeAll(async () => {
  downstream = await startFixtureDownstream({ holdMs: 1000 });
  doc = createDynamoDbClient({ endpoint: inject('dynamodbEndpoint') });
  const tableName = `confirmation-expiry-${randomUUID()}`;
  await ensureTable(doc, tableName);
  approvals = new DynamoDbApprovalStore({ client: doc, tableName });
  const services: ToolRuntime = createToolRuntime({
    store: new DynamoDbIdempotencyStore({ client: doc, tableName }),
    secret: randomUUID() + randomUUID(),
    approvals,
    publicBaseUrl: 'https://pay.example.com',
    clock: () => Date.now() + aheadMs,
  });
  const tenant = (authInfo: AuthInfo | undefined) => authInfo?.extra?.tenant;
  url = await servers.v2(() => {
    const server = new McpServer({ name: 'confirm-expiry', version: '1.0.0' });
    for (const tool of [sendPayout, publishPost]) registerWriteTool(server, tool, { services, tenant });
    return server;
  });
});

afterAll(async () => {
  await servers.close();
  if (doc) doc.destroy();
  await downstream?.stop();
});

/** A 2026-07-28 client whose person is asked through `onAsk` (every elicitation it shows them is kept in `asked`). */
async function personAt(
  capabilities: Record<string, unknown>,
  onAsk: (params: Record<string, unknown>) => Promise<Record<string, unknown>>,
) {
  const asked: Array<Record<string, unknown>> = [];
  const client = new ModernClient(
    { name: 'confirm-expiry-test', version: '1' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities },
  );
  client.setRequestHandler('elicitation/create', async (request) => {
    const params = request.params as Record<string, unknown>;
    asked.push(params);
    return (await onAsk(params)) as never;
  });
  await client.connect(new ModernTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${TENANT}` } } }));
  const call = async (name: string, args: Record<string, unknown>) =>
    ((await client.callTool({ name, arguments: args })) as { structuredContent?: Record<string, unknown> }).structuredContent;
  return { client, asked, call };
}

/** The person approves the round the link names (what the approval page does once they signed in and said yes). */
async function approveLink(link: string): Promise<void> {
  const binding = parseApprovalId(link.slice(link.lastIndexOf('/') + 1))!;
  const round = await approvals.current(binding);
  expect(round?.nonce).toBe(binding.nonce);
  expect(await approvals.decide(round!, { status: 'approved', by: 'alice', at: Date.now() + aheadMs, via: 'url' })).toMatchObject({
    applied: true,
  });
}

describe("a key whose settled record's retention ended under onExpired 'execute'", () => {
  it("an 'approval' tool sends the person to the page again before it runs again", async () => {
    const { client, asked, call } = await personAt({ elicitation: { url: {} } }, async (params) => {
      await approveLink(String(params.url));
      return { action: 'accept' };
    });
    try {
      const key = `key-${randomUUID()}`;
      const args = { idempotency_key: key, amount_minor: 500 };
      const first = await call('send_payout', args);
      expect(first).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(await call('send_payout', args)).toMatchObject({ outcome: 'succeeded', replayed: true, result: first!.result });
      expect(asked).toHaveLength(1);
      expect(runsOf(key)).toBe(1);

      aheadMs += RETENTION_SECONDS * 1000 + 1000;
      expect(await call('send_payout', args)).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(asked).toHaveLength(2);
      expect(asked[1]).toMatchObject({ mode: 'url' });
      expect(asked[1]!.url).not.toBe(asked[0]!.url);
      expect(runsOf(key)).toBe(2);
    } finally {
      await client.close();
    }
  });

  it("an 'approval' tool runs nothing again while the person has not approved anew", async () => {
    let approve = true;
    const { client, asked, call } = await personAt({ elicitation: { url: {} } }, async (params) => {
      if (approve) await approveLink(String(params.url));
      return { action: 'accept' };
    });
    try {
      const key = `key-${randomUUID()}`;
      const args = { idempotency_key: key, amount_minor: 700 };
      expect(await call('send_payout', args)).toMatchObject({ outcome: 'succeeded' });
      expect(runsOf(key)).toBe(1);

      aheadMs += RETENTION_SECONDS * 1000 + 1000;
      approve = false;
      // The client says "accept" but nobody approved the new round on the page: the SDK client gives up asking.
      await expect(call('send_payout', args)).rejects.toThrow();
      expect(asked.length).toBeGreaterThanOrEqual(2);
      expect(runsOf(key)).toBe(1);
    } finally {
      await client.close();
    }
  });

  it("a 'required' tool asks the person in the form again before it runs again", async () => {
    const { client, asked, call } = await personAt({ elicitation: { form: {} } }, async () => ({
      action: 'accept',
      content: { confirm: true },
    }));
    try {
      const key = `key-${randomUUID()}`;
      const args = { idempotency_key: key, title: 'Hello' };
      expect(await call('publish_post', args)).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(await call('publish_post', args)).toMatchObject({ outcome: 'succeeded', replayed: true });
      expect(asked).toHaveLength(1);
      expect(runsOf(key)).toBe(1);

      aheadMs += RETENTION_SECONDS * 1000 + 1000;
      expect(await call('publish_post', args)).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(asked).toHaveLength(2);
      expect(runsOf(key)).toBe(2);
    } finally {
      await client.close();
    }
  });
});
