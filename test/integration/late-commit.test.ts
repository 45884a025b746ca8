import { randomUUID } from 'node:crypto';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1ClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type AuthInfo, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { DynamoDbIdempotencyStore, ensureTable } from 'idempotent-mcp/dynamodb';
import { UncertainToolError } from 'idempotent-mcp/engine';
import { createToolRuntime, defineWriteTool, registerWriteTool, startReconciler, type ToolRuntime } from 'idempotent-mcp/mcp';
import type { LocalStack } from '../support/local-stack';
import { startFixtureDownstream, type FixtureDownstream } from '../support/fixture-downstream';
import { callWrite, connectModernClient, startTestStack } from '../support/mcp';
import { armFault, clearFaults, eventually, issueOperationId, paymentArgs, sandboxLedger } from '../support/side-effects';
import { OwnServers } from '../support/own-server';

/**
 * Issue 30: a provider that does not deduplicate and books a request after its caller gave up (`late-commit`). The
 * engine answers `unknown`; the reconciler, running every 200 ms, asks the provider while it is still booking and
 * hears "not found": that absence must decide nothing until the request's in-flight window has passed. Then the
 * payment is found, the record settles SUCCEEDED and the retry replays it: one payment in the provider's own ledger,
 * on the reference endpoint (its request_payment against the sandbox's payments provider) and on a team's own server
 * (SDK 1.x and v2) with startReconciler (a tool of its own against the fixture downstream).
 */
let stack: LocalStack;
const TENANT = 'tenant-late';
const DOWNSTREAM_TIMEOUT_MS = 1000;
/** The provider books this long after the request arrived: after the caller's timeout, inside the window. */
const LATE_MS = 2500;

const paymentsOf = async (key: string) => (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === key);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  stack = await startTestStack({
    env: {
      DOWNSTREAM_TIMEOUT_MS: String(DOWNSTREAM_TIMEOUT_MS),
      RECONCILE_INTERVAL_MS: '200',
      // The person confirms in a form (the operator's fallback for clients without URL elicitation).
      CONFIRMATION_OPT_OUT_TOOLS: '',
      CONFIRMATION_FORM_FALLBACK_TOOLS: 'request_payment',
    },
    workers: { relayPoller: false, consumerPoller: false },
  });
});
afterAll(() => stack?.stop());

// The two describes run side by side: they share no provider, table or reconciler, and each mostly waits for its
// in-flight window to pass. The team server's two tests share its provider's faults, so they run in turn.
describe.concurrent('request_payment on the reference endpoint, the provider booking after the caller gave up', () => {
  it('ends with one payment, the record SUCCEEDED and the retry replaying it', { timeout: 60_000 }, async () => {
    const client = await connectModernClient(stack, TENANT, { onConfirm: () => ({ action: 'accept', content: { confirm: true } }) });
    try {
      const operationId = await issueOperationId(client, 'request_payment');
      // Two uses: a second request with this id would be booked again (this provider does not deduplicate).
      await armFault(stack, { target: 'payments', mode: 'late-commit', times: 2, delay_ms: LATE_MS });
      const first = await callWrite(client, 'request_payment', paymentArgs(operationId));
      expect(first).toMatchObject({ outcome: 'unknown', retryable: true });

      // Several reconciler runs meanwhile; the provider has not booked yet when they ask. The agent retries early.
      await sleep(1500);
      const record = () => stack.services.store.get({ tenant: TENANT, tool: 'request_payment', idempotencyKey: operationId });
      const early = await callWrite(client, 'request_payment', paymentArgs(operationId));
      expect(early).toMatchObject({ outcome: 'unknown', retryable: true });

      // Settled, or charged twice (what happened before the window was kept).
      await eventually(
        async () => ((await record())?.status === 'SUCCEEDED' || (await paymentsOf(operationId)).length > 1 ? true : undefined),
        'the record to settle',
        40_000,
        200,
      );
      const payments = await paymentsOf(operationId);
      expect(payments).toHaveLength(1);
      expect(await record()).toMatchObject({ status: 'SUCCEEDED', reconcileAttempts: undefined });
      // The first answer said to come back after the window (the tool's execution timeout + DOWNSTREAM_TIMEOUT_MS).
      expect(first.retry_after_ms).toBeGreaterThanOrEqual(10_000);
      const replay = await callWrite<{ payment_id: string }>(client, 'request_payment', paymentArgs(operationId));
      expect(replay).toMatchObject({ outcome: 'succeeded', replayed: true, result: { payment_id: payments[0]!.payment_id } });
      expect(await paymentsOf(operationId)).toHaveLength(1);
    } finally {
      await client.close();
      await clearFaults(stack);
    }
  });
});

describe.concurrent("a team's own server with startReconciler, its provider booking after the caller gave up", () => {
  const servers = new OwnServers();
  let services: ToolRuntime;
  let reconciler: ReturnType<typeof startReconciler>;
  let provider: FixtureDownstream;

  /**
   * The team's supplier payment: a plain HTTP provider (the fixture downstream, which under `late-commit` neither
   * deduplicates nor notices a caller hanging up), so the tool does not declare `reexecuteSafe`. It finds a payment by
   * our key, which is what the reconciler asks.
   */
  const paySupplier = defineWriteTool({
    name: 'pay_supplier',
    title: 'Pay a supplier',
    description: 'Pays a supplier.',
    input: { supplier: z.string().min(1).max(64), amount_minor: z.number().int().positive() },
    result: z.object({ payment_id: z.string() }),
    annotations: { destructiveHint: true, openWorldHint: true },
    // The issue's case: the execution gives up after 2 s, the provider books after 2.5 s.
    idempotency: { executionTimeoutMs: 2000 },
    async execute(args, ctx) {
      const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(DOWNSTREAM_TIMEOUT_MS)]);
      let response: Response;
      try {
        response = await fetch(`${provider.url}/bookings`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            tenant: ctx.tenant,
            key: ctx.idempotencyKey,
            kind: 'payment',
            payload: { amount_minor: args.amount_minor, currency: 'EUR', payee_id: args.supplier },
          }),
          signal,
        });
      } catch {
        throw new UncertainToolError('PROVIDER_TIMEOUT', 'the provider did not answer in time');
      }
      if (response.status !== 201 && response.status !== 200)
        throw new UncertainToolError('PROVIDER_ERROR', `the provider answered ${response.status}`);
      return { result: { payment_id: ((await response.json()) as { booking_id: string }).booking_id } };
    },
    async reconcile({ record, signal }) {
      const query = new URLSearchParams({ tenant: record.tenant, key: record.idempotencyKey });
      const response = await fetch(`${provider.url}/bookings?${query}`, { signal });
      if (response.status === 404) return { kind: 'absent' };
      if (response.status !== 200) return { kind: 'unreachable', reason: `the provider answered ${response.status}` };
      return { kind: 'found', result: { payment_id: ((await response.json()) as { booking_id: string }).booking_id } };
    },
  });

  const registration = () => ({ services, tenant: (authInfo?: AuthInfo) => authInfo?.extra?.tenant });

  const urls: Record<'v1' | 'v2', string> = { v1: '', v2: '' };

  beforeAll(async () => {
    provider = await startFixtureDownstream({ holdMs: DOWNSTREAM_TIMEOUT_MS + 1000 });
    const tableName = `late-own-${randomUUID()}`;
    await ensureTable(stack.services.doc, tableName);
    const store = new DynamoDbIdempotencyStore({ client: stack.services.doc, tableName });
    // The same downstream timeout for the engine and the reconciler: both derive the tool's window from it.
    services = createToolRuntime({
      store,
      secret: randomUUID() + randomUUID(),
      engine: { downstreamTimeoutMs: DOWNSTREAM_TIMEOUT_MS, unknownRetryAfterMs: 200 },
    });
    reconciler = startReconciler({
      tools: [paySupplier],
      store,
      intervalMs: 200,
      downstreamTimeoutMs: DOWNSTREAM_TIMEOUT_MS,
      metrics: false,
      logger: silent,
    });
    urls.v1 = await servers.v1(() => {
      const server = new V1McpServer({ name: 'suppliers-v1', version: '1.0.0' });
      registerWriteTool(server, paySupplier, registration());
      return server;
    });
    urls.v2 = await servers.v2(() => {
      const server = new McpServer({ name: 'suppliers-v2', version: '1.0.0' });
      registerWriteTool(server, paySupplier, registration());
      return server;
    });
  });
  afterAll(async () => {
    await reconciler?.stop();
    await servers.close();
    await provider?.stop();
  });

  async function connect(line: 'v1' | 'v2') {
    const requestInit = { headers: { Authorization: `Bearer ${TENANT}` } } as RequestInit;
    if (line === 'v1') {
      const client = new V1Client({ name: 'late-test', version: '1' });
      await client.connect(new V1ClientTransport(new URL(urls.v1), { requestInit }));
      return client;
    }
    const client = new ModernClient({ name: 'late-test', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new ModernTransport(new URL(urls.v2), { requestInit }));
    return client;
  }

  it.sequential.each(['v1', 'v2'] as const)(
    'SDK %s: one payment, the record SUCCEEDED, the retry replays it',
    { timeout: 60_000 },
    async (line) => {
      const client = await connect(line);
      const key = `key-${randomUUID()}`;
      const args = { idempotency_key: key, supplier: `supplier-${line}`, amount_minor: 4200 };
      const record = () => services.store.get({ tenant: TENANT, tool: 'pay_supplier', idempotencyKey: key });
      try {
        provider.arm({ mode: 'late-commit', times: 2, delayMs: LATE_MS });
        expect(await callWrite(client, 'pay_supplier', args)).toMatchObject({ outcome: 'unknown', retryable: true });
        // The reconciler has asked (and heard "not found") before the provider booked; the retry must not run again.
        await eventually(async () => (provider.lookups(key) > 0 ? true : undefined), 'the reconciler to ask the provider', 10_000, 20);
        expect(await callWrite(client, 'pay_supplier', args)).toMatchObject({ outcome: 'unknown', retryable: true });
        await eventually(
          async () => ((await record())?.status === 'SUCCEEDED' || provider.bookings(key).length > 1 ? true : undefined),
          'the record to settle',
          30_000,
          200,
        );
        const payments = provider.bookings(key);
        expect(payments).toHaveLength(1);
        expect(await callWrite(client, 'pay_supplier', args)).toMatchObject({
          outcome: 'succeeded',
          replayed: true,
          result: { payment_id: payments[0]!.booking_id },
        });
        // One payment booked, from the one request that reached the provider: no retry ran the tool again.
        expect(provider.bookings(key)).toHaveLength(1);
        expect(provider.calls(key)).toBe(1);
      } finally {
        await client.close();
        provider.clear();
      }
    },
  );
});

const silent = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} } as unknown as Parameters<
  typeof startReconciler
>[0]['logger'];
