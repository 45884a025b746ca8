import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWriteTool } from '../../lambdas/mcp/tool-types';
import { createOrderTool } from '../../reference/tools/create-order';
import type { LocalStack } from '../support/local-stack';
import { manualClock, newKey } from '../support/engine';
import { callWrite, connectClient, connectModernClient, ledger, orderArgs, startTestStack } from '../support/mcp';

/**
 * The reference endpoint's tools beyond the engine: create_order's one key names one order forever, and the
 * reconciler can find it; what a 2026-07-28 client is listed (the toolkit's key marks are proved on the fixture tools
 * in test/integration/mcp-key-header.test.ts).
 */
let stack: LocalStack;
let client: Client;
const time = manualClock();
const TENANT = 'tenant-orders';
const DAY_MS = 24 * 3600 * 1000;

type Order = { order_id: string };

beforeAll(async () => {
  stack = await startTestStack({ services: { clock: time.clock } });
  client = await connectClient(stack, TENANT);
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

describe('create_order', () => {
  it('the order id is derived from tenant and key, so each key names exactly one order', async () => {
    const key = newKey();
    const made = await callWrite<Order>(client, 'create_order', orderArgs(key));
    expect(made.result!.order_id).toMatch(/^ord_[0-9a-f]{24}$/);
    const other = await connectClient(stack, 'tenant-orders-2');
    try {
      const sameKeyOtherTenant = await callWrite<Order>(other, 'create_order', orderArgs(key));
      expect(sameKeyOtherTenant.result!.order_id).not.toBe(made.result!.order_id);
    } finally {
      await other.close();
    }
  });

  it('after its record expired, the same key and arguments return the same order instead of a second one', async () => {
    const key = newKey();
    const first = await callWrite<Order>(client, 'create_order', orderArgs(key));
    time.advance(DAY_MS + 60_000);
    const late = await callWrite<Order>(client, 'create_order', orderArgs(key));
    expect(late).toMatchObject({ outcome: 'succeeded', result: first.result });
    expect((await ledger(stack)).orders.filter((o) => o.idempotency_key === key && o.tenant === TENANT)).toHaveLength(1);
  });

  it('after its record expired, the same key with other arguments fails instead of overwriting the order', async () => {
    const key = newKey();
    await callWrite<Order>(client, 'create_order', orderArgs(key));
    time.advance(DAY_MS + 60_000);
    const reused = await callWrite(client, 'create_order', orderArgs(key, { currency: 'USD' }));
    expect(reused).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    const orders = (await ledger(stack)).orders.filter((o) => o.idempotency_key === key && o.tenant === TENANT);
    expect(orders).toEqual([expect.objectContaining({ currency: 'EUR' })]);
  });

  it('its reconcile hook finds a committed order and reports a missing one absent', async () => {
    expect(isWriteTool(createOrderTool) && createOrderTool.reconcile).toBeTruthy();
    const key = newKey();
    const made = await callWrite<Order>(client, 'create_order', orderArgs(key));
    const record = (await stack.services.store.get({ tenant: TENANT, tool: 'create_order', idempotencyKey: key }))!;
    const signal = new AbortController().signal;

    const found = await createOrderTool.reconcile!({ record, signal }, stack.services);
    expect(found).toEqual({ kind: 'found', result: made.result });
    const absent = await createOrderTool.reconcile!({ record: { ...record, idempotencyKey: newKey() }, signal }, stack.services);
    expect(absent).toEqual({ kind: 'absent' });
  });
});

describe("the reference endpoint's tools as a 2026-07-28 client lists them", () => {
  it('each write tool has its key marked for mirroring (Mcp-Param-Idempotency-Key, Mcp-Param-Operation-Id), and the client keeps every tool', async () => {
    const modern = await connectModernClient(stack, TENANT);
    try {
      const { tools } = await modern.listTools();
      const keyOf = (name: string) =>
        tools.find((tool) => tool.name === name)!.inputSchema.properties as Record<string, Record<string, unknown>>;
      for (const name of ['create_order', 'send_email', 'create_ticket'])
        expect(keyOf(name).idempotency_key, name).toMatchObject({ type: 'string', 'x-mcp-header': 'Idempotency-Key' });
      expect(keyOf('request_payment').operation_id).toMatchObject({ type: 'string', 'x-mcp-header': 'Operation-Id' });
      // None carries a declaration the spec makes the client drop.
      expect(tools.map((tool) => tool.name)).toEqual(
        expect.arrayContaining(['create_order', 'request_payment', 'send_email', 'create_ticket', 'get_order', 'get_operation_status']),
      );
    } finally {
      await modern.close();
    }
  });
});
