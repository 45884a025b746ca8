import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack';
import { newKey } from '../support/engine';
import { tools as registry } from '../../reference/tools';
import { callRead, callWrite, connectClient, createProbeTools, ledger, orderArgs, startTestStack } from '../support/mcp';

/** The endpoint through the MCP SDK's own client over real HTTP: what an agent sees. */
let stack: LocalStack;
let client: Client;
const probes = createProbeTools();
const TENANT = 'tenant-endpoint';

beforeAll(async () => {
  // A short in-progress wait keeps the in_progress case quick; the outcome does not depend on it.
  stack = await startTestStack({ tools: [...registry, ...probes.tools], services: { engine: { inProgressWaitMs: 100 } } });
  client = await connectClient(stack, TENANT);
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

type Order = { order_id: string; status: string; items: unknown[]; currency: string; created_at: string };

describe('tools/list', () => {
  it('publishes every write tool with a required key, its usage, truthful annotations and the result contract', async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()]).toEqual(
      expect.arrayContaining(['create_order', 'get_order', 'get_operation_status', 'issue_operation_id']),
    );

    const createOrder = byName.get('create_order')!;
    expect(createOrder.inputSchema.required).toEqual(expect.arrayContaining(['idempotency_key', 'customer_id', 'items', 'currency']));
    expect(createOrder.inputSchema.required).not.toContain('trace_id');
    expect(createOrder.description).toMatch(/once per intended operation and reuse it unchanged on every retry/);
    expect(createOrder.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    });
    const output = createOrder.outputSchema as { properties: Record<string, { enum?: string[] }>; required: string[] };
    expect(output.properties.outcome!.enum).toEqual(['succeeded', 'failed', 'in_progress', 'unknown', 'conflict', 'rejected']);
    expect(output.required).toEqual(expect.arrayContaining(['outcome', 'replayed', 'retryable']));
    // Echoed whenever the call carried a key; a call without one echoes none.
    expect(output.properties).toHaveProperty('idempotency_key');

    const operationTool = byName.get('probe_operation')!;
    expect(operationTool.inputSchema.required).toContain('operation_id');
    expect(operationTool.inputSchema.required).not.toContain('idempotency_key');
    expect(operationTool.description).toMatch(/issue_operation_id/);

    for (const name of ['get_order', 'get_operation_status', 'issue_operation_id'])
      expect(byName.get(name)!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
  });
});

describe('the result contract, outcome by outcome', () => {
  it('succeeded, then replayed: the second call returns the first order and creates nothing', async () => {
    const key = newKey();
    const first = await callWrite<Order>(client, 'create_order', orderArgs(key));
    expect(first).toMatchObject({ outcome: 'succeeded', replayed: false, retryable: false, idempotency_key: key });
    expect(first.result).toMatchObject({ status: 'created', currency: 'EUR', items: [{ sku: 'SKU-1', quantity: 2 }] });
    expect(first.result!.order_id).toMatch(/^ord_/);

    const again = await callWrite<Order>(client, 'create_order', orderArgs(key, { trace_id: 'another-trace' }));
    expect(again).toMatchObject({ outcome: 'succeeded', replayed: true, retryable: false, result: first.result });
    expect(again.first_executed_at).toEqual(expect.any(String));

    const orders = (await ledger(stack)).orders.filter((o) => o.idempotency_key === key);
    expect(orders).toEqual([expect.objectContaining({ tenant: TENANT, order_id: first.result!.order_id })]);
  });

  it('the text content says the same in one sentence', async () => {
    const answer = await client.callTool({ name: 'create_order', arguments: orderArgs(newKey(), { currency: 'euro' }) });
    const [sentence] = answer.content as Array<{ type: string; text: string }>;
    expect(answer.isError).toBe(true);
    expect(sentence!.text).toMatch(/^Rejected \(INVALID_ARGUMENTS\): .*currency/);
  });

  it('conflict: the same key with other arguments runs nothing', async () => {
    const key = newKey();
    await callWrite(client, 'create_order', orderArgs(key));
    const other = await callWrite(client, 'create_order', orderArgs(key, { items: [{ sku: 'SKU-2', quantity: 1 }] }));
    expect(other).toMatchObject({
      outcome: 'conflict',
      retryable: false,
      error: { code: 'IDEMPOTENCY_KEY_REUSED' },
    });
    expect((await ledger(stack)).orders.filter((o) => o.idempotency_key === key)).toHaveLength(1);
  });

  it('rejected: arguments that fail the schema name the field, and nothing is recorded', async () => {
    const key = newKey();
    const bad = await callWrite(client, 'create_order', orderArgs(key, { items: [{ sku: 'SKU-1', quantity: 0 }] }));
    expect(bad).toMatchObject({ outcome: 'rejected', retryable: false, idempotency_key: key, error: { code: 'INVALID_ARGUMENTS' } });
    expect(bad.error!.message).toContain('items[0].quantity');

    const missing = await callWrite(client, 'create_order', { idempotency_key: key, items: [{ sku: 'A', quantity: 1 }] });
    expect(missing).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS' } });
    expect(missing.error!.message).toContain('customer_id');
    expect(missing.error!.message).toContain('currency');

    // Nothing was claimed: the same key now executes.
    expect(await callWrite(client, 'create_order', orderArgs(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
  });

  it('rejected: a missing or malformed key is INVALID_IDEMPOTENCY_KEY', async () => {
    const { idempotency_key: _omitted, ...withoutKey } = orderArgs('unused-key');
    for (const args of [withoutKey, orderArgs('short'), orderArgs('has spaces in it'), orderArgs('x'.repeat(129))]) {
      const answer = await callWrite(client, 'create_order', args);
      expect(answer).toMatchObject({ outcome: 'rejected', retryable: false, error: { code: 'INVALID_IDEMPOTENCY_KEY' } });
      expect(answer.error!.message).toContain('idempotency_key');
    }
  });

  it('rejected: a missing key is "required", and every sentence of the answer ends before the next begins', async () => {
    const { idempotency_key: _omitted, ...withoutKey } = orderArgs('unused-key');
    const answer = await client.callTool({ name: 'create_order', arguments: withoutKey });
    expect(answer.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_IDEMPOTENCY_KEY', message: 'idempotency_key is required.' } });
    const text = (answer.content as Array<{ text: string }>)[0]!.text;
    expect(text).toBe('Rejected (INVALID_IDEMPOTENCY_KEY): idempotency_key is required. Fix the call; retrying it unchanged will not help.');
    // Whatever the refusal, no sentence runs into the next ("... must be a string Fix the call").
    for (const args of [orderArgs('short'), { ...orderArgs(newKey()), currency: 'euro' }]) {
      const refused = await client.callTool({ name: 'create_order', arguments: args });
      expect((refused.content as Array<{ text: string }>)[0]!.text).toMatch(/[.!?] Fix the call;/);
    }
  });

  it('failed: a business rejection is stored and replayed, never executed twice', async () => {
    const key = newKey();
    const first = await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'terminal' });
    expect(first).toMatchObject({ outcome: 'failed', replayed: false, retryable: false, error: { code: 'CARD_DECLINED' } });
    const again = await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'terminal' });
    expect(again).toMatchObject({ outcome: 'failed', replayed: true, error: { code: 'CARD_DECLINED', message: 'The card was declined.' } });
    expect(probes.runs(TENANT, key)).toBe(1);
  });

  it('failed and retryable: a transient failure releases the key, so the retry executes', async () => {
    const key = newKey();
    const first = await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'transient' });
    expect(first).toMatchObject({ outcome: 'failed', retryable: true, retry_after_ms: 250, error: { code: 'TRANSIENT_FAILURE' } });
    expect(await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'transient' })).toMatchObject({ outcome: 'failed' });
    expect(probes.runs(TENANT, key)).toBe(2);
  });

  it('unknown: an uncertain failure is kept for verification and a retry does not run it again', async () => {
    const key = newKey();
    const first = await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'uncertain' });
    expect(first).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'OUTCOME_UNKNOWN' } });
    expect(first.retry_after_ms).toBeGreaterThan(0);
    const again = await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'uncertain' });
    expect(again).toMatchObject({ outcome: 'unknown', retryable: true });
    expect(probes.runs(TENANT, key)).toBe(1);

    const status = await callRead(client, 'get_operation_status', { tool: 'probe_write', idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'unknown', error: { code: 'DOWNSTREAM_TIMEOUT' } });
  });

  it('in_progress: a duplicate of a running call waits briefly, then says so; afterwards it replays', async () => {
    const key = newKey();
    const gate = probes.gate(key);
    const firstCall = callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'block' });
    await gate.entered.promise;

    const duplicate = await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'block' });
    expect(duplicate).toMatchObject({ outcome: 'in_progress', retryable: true, error: { code: 'OPERATION_IN_PROGRESS' } });
    expect(duplicate.retry_after_ms).toBeGreaterThan(0);
    const status = await callRead(client, 'get_operation_status', { tool: 'probe_write', idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'processing' });

    gate.release.resolve();
    expect(await firstCall).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await callWrite(client, 'probe_write', { idempotency_key: key, behavior: 'block' })).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
    });
    expect(probes.runs(TENANT, key)).toBe(1);
  });
});

describe('50 concurrent identical create_order calls', () => {
  it('make one order, and every success carries the same order_id', async () => {
    const key = newKey();
    const answers = await Promise.all(Array.from({ length: 50 }, () => callWrite<Order>(client, 'create_order', orderArgs(key))));
    const outcomes = new Set(answers.map((a) => a.outcome));
    // A duplicate that outwaits the in-progress window says so instead of running: never anything else.
    expect([...outcomes].every((o) => o === 'succeeded' || o === 'in_progress')).toBe(true);
    const succeeded = answers.filter((a) => a.outcome === 'succeeded');
    expect(succeeded.filter((a) => !a.replayed)).toHaveLength(1);
    const orderIds = new Set(succeeded.map((a) => a.result!.order_id));
    expect(orderIds.size).toBe(1);

    const orders = (await ledger(stack)).orders.filter((o) => o.idempotency_key === key);
    expect(orders).toHaveLength(1);
    expect(orders[0]!.order_id).toBe([...orderIds][0]);
    // Those told "in progress" get the same order on their retry.
    const retry = await callWrite<Order>(client, 'create_order', orderArgs(key));
    expect(retry).toMatchObject({ outcome: 'succeeded', replayed: true, result: { order_id: [...orderIds][0] } });
  });
});

describe('read tools', () => {
  it('get_order returns an order made by create_order, and NOT_FOUND for an unknown id', async () => {
    const made = await callWrite<Order>(client, 'create_order', orderArgs(newKey()));
    const found = await callRead(client, 'get_order', { order_id: made.result!.order_id });
    expect(found).toMatchObject({ isError: false, structured: made.result });
    const missing = await callRead(client, 'get_order', { order_id: 'ord_000000000000000000000000' });
    expect(missing.isError).toBe(true);
    expect(missing.text).toMatch(/^NOT_FOUND/);
  });

  it('get_operation_status reports a call that stopped mid-flight (lease passed) as unknown, not processing', async () => {
    const key = newKey();
    const now = Date.now();
    // What a crashed executor leaves behind: its claim, with a lease that has run out.
    await stack.services.store.claim(
      {
        tenant: TENANT,
        tool: 'create_order',
        idempotencyKey: key,
        fingerprint: 'f'.repeat(64),
        status: 'PROCESSING',
        ownerToken: 'crashed-executor',
        createdAt: now - 60_000,
        updatedAt: now - 60_000,
        leaseExpiresAt: now - 30_000,
        retainUntil: now + 3_600_000,
        expiresAt: Math.floor((now + 3_600_000) / 1000),
      },
      now - 60_000,
    );
    const status = await callRead(client, 'get_operation_status', { tool: 'create_order', idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'unknown', created_at: new Date(now - 60_000).toISOString() });
  });

  it("get_operation_status reads expiry by the tool's policy: past retention under 'execute' the key is free, so not_found", async () => {
    const key = newKey();
    const now = Date.now();
    // Replayed until a minute ago; its TTL (the review window a 'review' tool would keep) is still an hour away.
    const record = {
      tenant: TENANT,
      tool: 'create_order',
      idempotencyKey: key,
      fingerprint: 'f'.repeat(64),
      status: 'PROCESSING' as const,
      ownerToken: 'settled-executor',
      createdAt: now - 120_000,
      updatedAt: now - 120_000,
      leaseExpiresAt: now - 110_000,
      retainUntil: now - 60_000,
      expiresAt: Math.floor((now + 3_600_000) / 1000),
    };
    await stack.services.store.claim(record, now - 120_000);
    await stack.services.store.settle(record, record.ownerToken, { status: 'SUCCEEDED', result: { order_id: 'old' } }, now - 119_000);
    const status = await callRead(client, 'get_operation_status', { tool: 'create_order', idempotency_key: key });
    // A call with this key now runs again (create_order's policy is 'execute'): nothing on record answers for it.
    expect(status.structured).toEqual({ tool: 'create_order', idempotency_key: key, status: 'not_found' });
  });

  it('get_operation_status reports not_found, then succeeded with the result and times', async () => {
    const key = newKey();
    const before = await callRead(client, 'get_operation_status', { tool: 'create_order', idempotency_key: key });
    expect(before.structured).toEqual({ tool: 'create_order', idempotency_key: key, status: 'not_found' });
    const made = await callWrite<Order>(client, 'create_order', orderArgs(key));
    const after = await callRead(client, 'get_operation_status', { tool: 'create_order', idempotency_key: key });
    expect(after.structured).toMatchObject({ status: 'succeeded', result: made.result });
    expect(after.structured).toHaveProperty('created_at');
    expect(after.structured).toHaveProperty('replay_until');
  });

  it('read tools reject bad arguments naming the field, and a tool that is not a write tool', async () => {
    const bad = await callRead(client, 'get_operation_status', { tool: 'create_order' });
    expect(bad.isError).toBe(true);
    expect(bad.text).toMatch(/INVALID_ARGUMENTS.*idempotency_key/);
    const notWrite = await callRead(client, 'get_operation_status', { tool: 'get_order', idempotency_key: newKey() });
    expect(notWrite.text).toMatch(/INVALID_ARGUMENTS.*write tools/);
  });

  it('an unknown tool is a protocol error, not a result', async () => {
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(/Unknown tool/);
    // A misspelled name says which tool was meant; an unrelated one suggests nothing.
    await expect(client.callTool({ name: 'create_ordr', arguments: {} })).rejects.toThrow(/Unknown tool: create_ordr\. Did you mean create_order\?/);
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.not.toThrow(/Did you mean/);
  });
});
