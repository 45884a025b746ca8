import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey } from '../support/engine';
import { tools as registry } from '../../reference/tools';
import {
  FIXTURE_LIMIT_MINOR,
  fixtureBookingReadTool,
  fixtureOrder,
  fixtureOrderId,
  fixturePaymentArgs,
  FixtureTool,
  startFixtureStack,
  tableItemsNaming,
  type FixtureStack,
} from '../support/fixture-tools';
import { issueOperationId } from '../support/side-effects';
import { callRead, callWrite, connectClient, ledger, orderArgs } from '../support/mcp';

/**
 * The endpoint through the MCP SDK's own client over real HTTP: what an agent sees. The toolkit's behaviour runs on
 * the fixture tools, counted where their effects land (the fixture downstream's requests and bookings, the order
 * items in the table). The tests named after create_order and get_order are about the reference endpoint's own
 * tools, served beside them (its orders counted in the table through the sandbox ledger).
 */
let stack: FixtureStack;
let client: Client;
const TENANT = 'tenant-endpoint';
const WRITE = FixtureTool.write;
const ORDER = FixtureTool.order;
const READ = 'fixture_get_booking';
const note = (key: string, overrides: Record<string, unknown> = {}) => ({ idempotency_key: key, note: 'hello', ...overrides });
const fixtureOrderArgs = (key: string, overrides: Record<string, unknown> = {}) => ({
  idempotency_key: key,
  item: 'widget',
  quantity: 2,
  ...overrides,
});

beforeAll(async () => {
  // A short in-progress wait keeps the in_progress case quick; the outcome does not depend on it. No background
  // workers: nothing here queues an event, and no reconciler may settle an unknown call between a test's steps.
  stack = await startFixtureStack({
    tools: [...registry, fixtureBookingReadTool(() => stack.downstream.url)],
    services: { engine: { inProgressWaitMs: 100 } },
    workers: { reconcilerTimer: false, relayPoller: false, consumerPoller: false },
  });
  client = await connectClient(stack, TENANT);
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

type Order = { order_id: string; status: string; items: unknown[]; currency: string; created_at: string };
type Booked = { booking_id: string; key: string };

describe('tools/list', () => {
  it('publishes every write tool with a required key, its usage, truthful annotations and the result contract', async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()]).toEqual(expect.arrayContaining([ORDER, WRITE, READ, 'get_operation_status', 'issue_operation_id']));

    for (const [name, openWorld] of [
      [ORDER, false],
      [WRITE, true],
    ] as const) {
      const tool = byName.get(name)!;
      expect(tool.inputSchema.required, name).toEqual(expect.arrayContaining(['idempotency_key']));
      expect(tool.inputSchema.required, name).not.toContain('trace_id');
      expect(tool.description, name).toMatch(/once per intended operation and reuse it unchanged on every retry/);
      expect(tool.annotations, name).toMatchObject({
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: openWorld,
      });
      const output = tool.outputSchema as { properties: Record<string, { enum?: string[] }>; required: string[] };
      expect(output.properties.outcome!.enum).toEqual(['succeeded', 'failed', 'in_progress', 'unknown', 'conflict', 'rejected']);
      expect(output.required).toEqual(expect.arrayContaining(['outcome', 'replayed', 'retryable']));
      // Echoed whenever the call carried a key; a call without one echoes none.
      expect(output.properties).toHaveProperty('idempotency_key');
    }
    expect(byName.get(ORDER)!.inputSchema.required).toEqual(expect.arrayContaining(['item', 'quantity']));
    expect(byName.get(WRITE)!.inputSchema.required).toEqual(expect.arrayContaining(['note']));

    const operationTool = byName.get(FixtureTool.payment)!;
    expect(operationTool.inputSchema.required).toContain('operation_id');
    expect(operationTool.inputSchema.required).not.toContain('idempotency_key');
    expect(operationTool.description).toMatch(/issue_operation_id/);
    expect(operationTool.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true });

    for (const name of [READ, 'get_operation_status', 'issue_operation_id'])
      expect(byName.get(name)!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
  });
});

describe('the result contract, outcome by outcome', () => {
  it('succeeded, then replayed: the second call returns the first order and creates nothing', async () => {
    const key = newKey();
    const first = await callWrite<Booked>(client, WRITE, note(key));
    expect(first).toMatchObject({ outcome: 'succeeded', replayed: false, retryable: false, idempotency_key: key });
    expect(first.result).toEqual({ booking_id: expect.stringMatching(/^bk-/), key });

    const again = await callWrite<Booked>(client, WRITE, note(key, { trace_id: 'another-trace' }));
    expect(again).toMatchObject({ outcome: 'succeeded', replayed: true, retryable: false, result: first.result });
    expect(again.first_executed_at).toEqual(expect.any(String));

    // One request reached the downstream; it holds one booking, the one answered.
    expect(stack.downstream.calls(key)).toBe(1);
    expect(stack.downstream.bookings(key)).toEqual([expect.objectContaining({ tenant: TENANT, booking_id: first.result!.booking_id })]);
  });

  it('the text content says the same in one sentence', async () => {
    const answer = await client.callTool({ name: ORDER, arguments: fixtureOrderArgs(newKey(), { quantity: 'two' }) });
    const [sentence] = answer.content as Array<{ type: string; text: string }>;
    expect(answer.isError).toBe(true);
    expect(sentence!.text).toMatch(/^Rejected \(INVALID_ARGUMENTS\): .*quantity/);
  });

  it('conflict: the same key with other arguments runs nothing', async () => {
    const key = newKey();
    await callWrite(client, WRITE, note(key));
    const other = await callWrite(client, WRITE, note(key, { note: 'other words' }));
    expect(other).toMatchObject({
      outcome: 'conflict',
      retryable: false,
      error: { code: 'IDEMPOTENCY_KEY_REUSED' },
    });
    expect(stack.downstream.calls(key)).toBe(1);
    expect(stack.downstream.bookings(key)).toEqual([expect.objectContaining({ payload: { note: 'hello' } })]);
  });

  it('rejected: arguments that fail the schema name the field, and nothing is recorded', async () => {
    const key = newKey();
    const bad = await callWrite(client, ORDER, fixtureOrderArgs(key, { quantity: 0 }));
    expect(bad).toMatchObject({ outcome: 'rejected', retryable: false, idempotency_key: key, error: { code: 'INVALID_ARGUMENTS' } });
    expect(bad.error!.message).toContain('quantity');

    const missing = await callWrite(client, ORDER, { idempotency_key: key });
    expect(missing).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS' } });
    expect(missing.error!.message).toContain('item');
    expect(missing.error!.message).toContain('quantity');
    expect(await stack.services.store.get({ tenant: TENANT, tool: ORDER, idempotencyKey: key })).toBeUndefined();
    expect(await fixtureOrder(stack, TENANT, key)).toBeUndefined();

    // Nothing was claimed: the same key now executes.
    expect(await callWrite(client, ORDER, fixtureOrderArgs(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await fixtureOrder(stack, TENANT, key)).toBeDefined();
  });

  it('rejected: a missing or malformed key is INVALID_IDEMPOTENCY_KEY', async () => {
    const { idempotency_key: _omitted, ...withoutKey } = note('unused-key');
    for (const args of [withoutKey, note('short'), note('has spaces in it'), note('x'.repeat(129))]) {
      const answer = await callWrite(client, WRITE, args);
      expect(answer).toMatchObject({ outcome: 'rejected', retryable: false, error: { code: 'INVALID_IDEMPOTENCY_KEY' } });
      expect(answer.error!.message).toContain('idempotency_key');
    }
    expect(stack.downstream.calls('short')).toBe(0);
  });

  it('rejected: a missing key is "required", and every sentence of the answer ends before the next begins', async () => {
    const { idempotency_key: _omitted, ...withoutKey } = note('unused-key');
    const answer = await client.callTool({ name: WRITE, arguments: withoutKey });
    expect(answer.structuredContent).toMatchObject({
      outcome: 'rejected',
      error: { code: 'INVALID_IDEMPOTENCY_KEY', message: 'idempotency_key is required.' },
    });
    const text = (answer.content as Array<{ text: string }>)[0]!.text;
    expect(text).toBe(
      'Rejected (INVALID_IDEMPOTENCY_KEY): idempotency_key is required. Fix the call; retrying it unchanged will not help.',
    );
    // Whatever the refusal, no sentence runs into the next ("... must be a string Fix the call").
    for (const args of [note('short'), note(newKey(), { note: 42 })]) {
      const refused = await client.callTool({ name: WRITE, arguments: args });
      expect((refused.content as Array<{ text: string }>)[0]!.text).toMatch(/[.!?] Fix the call;/);
    }
  });

  it('failed: a business rejection is stored and replayed, never executed twice', async () => {
    // The downstream refuses amounts above its limit (HTTP 422): a terminal answer, nothing booked.
    const id = await issueOperationId(client, FixtureTool.payment);
    const args = fixturePaymentArgs(id, { amount_minor: FIXTURE_LIMIT_MINOR + 1 });
    const first = await callWrite(client, FixtureTool.payment, args);
    expect(first).toMatchObject({ outcome: 'failed', replayed: false, retryable: false, error: { code: 'DOWNSTREAM_REJECTED' } });
    const again = await callWrite(client, FixtureTool.payment, args);
    expect(again).toMatchObject({
      outcome: 'failed',
      replayed: true,
      error: { code: 'DOWNSTREAM_REJECTED', message: first.error!.message },
    });
    expect(first.error!.message).toMatch(/refused/);
    expect(stack.downstream.calls(id)).toBe(1);
    expect(stack.downstream.bookings(id)).toEqual([]);
  });

  it('failed and retryable: a transient failure releases the key, so the retry executes', async () => {
    const key = newKey();
    // The downstream is unavailable (503, nothing booked) for both calls.
    stack.downstream.arm({ mode: 'unavailable', times: 2 });
    const first = await callWrite(client, WRITE, note(key));
    expect(first).toMatchObject({ outcome: 'failed', retryable: true, retry_after_ms: 1000, error: { code: 'TRANSIENT_FAILURE' } });
    expect(await callWrite(client, WRITE, note(key))).toMatchObject({ outcome: 'failed' });
    expect(stack.downstream.calls(key)).toBe(2);
    expect(stack.downstream.bookings(key)).toEqual([]);
    // Released, not remembered: the next call books.
    expect(await callWrite(client, WRITE, note(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(stack.downstream.bookings(key)).toHaveLength(1);
  });

  it('unknown: an uncertain failure is kept for verification and a retry does not run it again', async () => {
    const key = newKey();
    // The downstream fails with HTTP 500: the caller cannot tell whether it booked.
    stack.downstream.arm({ mode: 'fail-before-commit' });
    const first = await callWrite(client, WRITE, note(key));
    expect(first).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'OUTCOME_UNKNOWN' } });
    expect(first.retry_after_ms).toBeGreaterThan(0);
    const again = await callWrite(client, WRITE, note(key));
    expect(again).toMatchObject({ outcome: 'unknown', retryable: true });
    expect(stack.downstream.calls(key)).toBe(1);

    const status = await callRead(client, 'get_operation_status', { tool: WRITE, idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'unknown', error: { code: 'DOWNSTREAM_ERROR' } });
  });

  it('in_progress: a duplicate of a running call waits briefly, then says so; afterwards it replays', async () => {
    const key = newKey();
    const held = stack.downstream.hold(key);
    const firstCall = callWrite(client, WRITE, note(key));
    await held.entered;

    const duplicate = await callWrite(client, WRITE, note(key));
    expect(duplicate).toMatchObject({ outcome: 'in_progress', retryable: true, error: { code: 'OPERATION_IN_PROGRESS' } });
    expect(duplicate.retry_after_ms).toBeGreaterThan(0);
    const status = await callRead(client, 'get_operation_status', { tool: WRITE, idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'processing' });

    held.release();
    expect(await firstCall).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await callWrite(client, WRITE, note(key))).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
    });
    expect(stack.downstream.calls(key)).toBe(1);
    expect(stack.downstream.bookings(key)).toHaveLength(1);
  });
});

describe('50 concurrent identical calls of a write tool', () => {
  it('through a downstream: one request reaches it, one booking, one record in the table; every success carries that booking', async () => {
    const key = newKey();
    const answers = await Promise.all(Array.from({ length: 50 }, () => callWrite<Booked>(client, WRITE, note(key))));
    // A duplicate that outwaits the in-progress window says so instead of running: never anything else.
    expect(answers.every((a) => a.outcome === 'succeeded' || a.outcome === 'in_progress')).toBe(true);
    const succeeded = answers.filter((a) => a.outcome === 'succeeded');
    const fresh = succeeded.filter((a) => !a.replayed);
    expect(fresh).toHaveLength(1);
    for (const answer of succeeded) expect(answer.result).toEqual(fresh[0]!.result);

    expect(stack.downstream.calls(key)).toBe(1);
    const [booking] = stack.downstream.bookings(key);
    expect(stack.downstream.bookings(key)).toHaveLength(1);
    expect(fresh[0]!.result).toEqual({ booking_id: booking!.booking_id, key });
    const items = await tableItemsNaming(stack, key);
    expect(items).toHaveLength(1);
    expect(await stack.services.store.get({ tenant: TENANT, tool: WRITE, idempotencyKey: key })).toMatchObject({
      status: 'SUCCEEDED',
      result: fresh[0]!.result,
    });
    // Those told "in progress" get the same booking on their retry, and nothing more is sent.
    expect(await callWrite<Booked>(client, WRITE, note(key))).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
      result: fresh[0]!.result,
    });
    expect(stack.downstream.calls(key)).toBe(1);
  });

  it('committed with the record (one request): one order item and one record in the table; every success carries that order', async () => {
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => callWrite<{ order_id: string }>(client, ORDER, fixtureOrderArgs(key))),
    );
    expect(answers.every((a) => a.outcome === 'succeeded' || a.outcome === 'in_progress')).toBe(true);
    const succeeded = answers.filter((a) => a.outcome === 'succeeded');
    expect(succeeded.filter((a) => !a.replayed)).toHaveLength(1);
    expect(new Set(succeeded.map((a) => a.result!.order_id))).toEqual(new Set([fixtureOrderId(key)]));

    // In the table: the one order and the one record that answers for it, nothing else under the key.
    const items = await tableItemsNaming(stack, key);
    expect(items).toHaveLength(2);
    expect(items.filter((item) => item.order_id === fixtureOrderId(key))).toHaveLength(1);
    expect(await fixtureOrder(stack, TENANT, key)).toMatchObject({ order_id: fixtureOrderId(key), item: 'widget', quantity: 2 });
    expect(await stack.services.store.get({ tenant: TENANT, tool: ORDER, idempotencyKey: key })).toMatchObject({ status: 'SUCCEEDED' });
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
        tool: WRITE,
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
    const status = await callRead(client, 'get_operation_status', { tool: WRITE, idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'unknown', created_at: new Date(now - 60_000).toISOString() });
  });

  it("get_operation_status reads expiry by the tool's policy: past retention under 'execute' the key is free, so not_found", async () => {
    const key = newKey();
    const now = Date.now();
    // Replayed until a minute ago; its TTL (the review window a 'review' tool would keep) is still an hour away.
    const record = {
      tenant: TENANT,
      tool: WRITE,
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
    await stack.services.store.settle(
      record,
      record.ownerToken,
      { status: 'SUCCEEDED', result: { booking_id: 'old', key } },
      now - 119_000,
    );
    const status = await callRead(client, 'get_operation_status', { tool: WRITE, idempotency_key: key });
    // A call with this key now runs again (fixture_write's policy is the default, 'execute'): nothing on record answers for it.
    expect(status.structured).toEqual({ tool: WRITE, idempotency_key: key, status: 'not_found' });
    expect(await callWrite(client, WRITE, note(key))).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(stack.downstream.calls(key)).toBe(1);
  });

  it('get_operation_status reports not_found, then succeeded with the result and times', async () => {
    const key = newKey();
    const before = await callRead(client, 'get_operation_status', { tool: ORDER, idempotency_key: key });
    expect(before.structured).toEqual({ tool: ORDER, idempotency_key: key, status: 'not_found' });
    const made = await callWrite<{ order_id: string }>(client, ORDER, fixtureOrderArgs(key));
    expect(made.result).toEqual({ order_id: fixtureOrderId(key), item: 'widget', quantity: 2 });
    const after = await callRead(client, 'get_operation_status', { tool: ORDER, idempotency_key: key });
    expect(after.structured).toMatchObject({ status: 'succeeded', result: made.result });
    expect(after.structured).toHaveProperty('created_at');
    expect(after.structured).toHaveProperty('replay_until');
  });

  it('read tools reject bad arguments naming the field, and a tool that is not a write tool', async () => {
    const bad = await callRead(client, 'get_operation_status', { tool: WRITE });
    expect(bad.isError).toBe(true);
    expect(bad.text).toMatch(/INVALID_ARGUMENTS.*idempotency_key/);
    const badRead = await callRead(client, READ, { key: 42 });
    expect(badRead.isError).toBe(true);
    expect(badRead.text).toMatch(/INVALID_ARGUMENTS.*key/);
    const notWrite = await callRead(client, 'get_operation_status', { tool: READ, idempotency_key: newKey() });
    expect(notWrite.text).toMatch(/INVALID_ARGUMENTS.*write tools/);
  });

  it('an unknown tool is a protocol error, not a result', async () => {
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(/Unknown tool/);
    // A misspelled name says which tool was meant; an unrelated one suggests nothing.
    await expect(client.callTool({ name: 'fixture_writ', arguments: {} })).rejects.toThrow(
      /Unknown tool: fixture_writ\. Did you mean fixture_write\?/,
    );
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.not.toThrow(/Did you mean/);
  });
});
