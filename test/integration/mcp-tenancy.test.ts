import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKey } from '../support/engine';
import { fixtureBookingReadTool, FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callRead, callWrite, connectClient } from '../support/mcp';

/**
 * The tenant comes only from the token; one tenant never reads, replays or conflicts with another's records. On the
 * fixture tools: what ran, and as whom, is what the fixture downstream holds (each booking names its tenant).
 */
let stack: FixtureStack;
let alice: Client;
let bob: Client;
const TENANT_A = 'tenant-alice';
const TENANT_B = 'tenant-bob';
const WRITE = FixtureTool.write;
const READ = 'fixture_get_booking';

type Booked = { booking_id: string; key: string };
const note = (key: string, overrides: Record<string, unknown> = {}) => ({ idempotency_key: key, note: 'hello', ...overrides });

beforeAll(async () => {
  // No background workers: no reconciler may settle B's unknown call while the test looks at it.
  stack = await startFixtureStack({
    tools: [fixtureBookingReadTool(() => stack.downstream.url)],
    workers: { reconcilerTimer: false, relayPoller: false, consumerPoller: false },
  });
  [alice, bob] = await Promise.all([connectClient(stack, TENANT_A), connectClient(stack, TENANT_B)]);
});
afterAll(async () => {
  await Promise.all([alice?.close(), bob?.close()]);
  await stack?.stop();
});

describe('tenant isolation', () => {
  it('an argument named like a tenant is refused, naming it: the token decides, and nothing ran under the key', async () => {
    const key = newKey();
    const refused = await callWrite<Booked>(alice, WRITE, note(key, { tenant: TENANT_B, tenant_id: TENANT_B }));
    expect(refused).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS', message: expect.stringMatching(/tenant/) } });
    expect(stack.downstream.calls(key)).toBe(0);
    expect(await stack.services.store.get({ tenant: TENANT_A, tool: WRITE, idempotencyKey: key })).toBeUndefined();
    // The key stayed free: without those arguments it runs, as the token's tenant (the executing tool sees it too).
    const made = await callWrite<Booked>(alice, WRITE, note(key));
    expect(made).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(stack.downstream.bookings(key)).toEqual([expect.objectContaining({ tenant: TENANT_A, booking_id: made.result!.booking_id })]);
    const other = newKey();
    expect(await callWrite(alice, WRITE, note(other, { tenant: TENANT_B }))).toMatchObject({
      outcome: 'rejected',
      error: { code: 'INVALID_ARGUMENTS' },
    });
    expect(stack.downstream.calls(other)).toBe(0);
  });

  it("the same key in another tenant is another operation: no replay of A's result, no conflict", async () => {
    const key = newKey();
    const fromA = await callWrite<Booked>(alice, WRITE, note(key));
    const sameArgsFromB = await callWrite<Booked>(bob, WRITE, note(key));
    expect(sameArgsFromB).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(sameArgsFromB.result!.booking_id).not.toBe(fromA.result!.booking_id);

    const otherKey = newKey();
    await callWrite(alice, WRITE, note(otherKey));
    const otherArgsFromB = await callWrite(bob, WRITE, note(otherKey, { note: 'other words' }));
    expect(otherArgsFromB).toMatchObject({ outcome: 'succeeded', replayed: false });

    expect(
      stack.downstream
        .bookings(key)
        .map((b) => b.tenant)
        .sort(),
    ).toEqual([TENANT_A, TENANT_B]);
    expect(
      stack.downstream
        .bookings(otherKey)
        .map((b) => [b.tenant, b.payload.note])
        .sort(),
    ).toEqual([
      [TENANT_A, 'hello'],
      [TENANT_B, 'other words'],
    ]);
  });

  it("B cannot read A's order or A's operation status", async () => {
    const key = newKey();
    const fromA = await callWrite<Booked>(alice, WRITE, note(key));

    const read = await callRead(bob, READ, { key });
    expect(read.isError).toBe(true);
    expect(read.text).toMatch(/^NOT_FOUND/);
    const status = await callRead(bob, 'get_operation_status', { tool: WRITE, idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'not_found' });
    expect(status.structured).not.toHaveProperty('result');

    // A still sees both.
    expect(await callRead(alice, READ, { key })).toMatchObject({
      isError: false,
      structured: { booking_id: fromA.result!.booking_id, tenant: TENANT_A },
    });
    expect((await callRead(alice, 'get_operation_status', { tool: WRITE, idempotency_key: key })).structured).toMatchObject({
      status: 'succeeded',
    });
  });

  it("B's uncertain failure under a key does not touch A's record under the same key", async () => {
    const key = newKey();
    await callWrite(alice, WRITE, note(key));
    // B's request reaches the downstream, which fails before booking: B cannot tell whether it happened.
    stack.downstream.arm({ mode: 'fail-before-commit' });
    expect(await callWrite(bob, WRITE, note(key))).toMatchObject({ outcome: 'unknown' });
    expect(await callWrite(alice, WRITE, note(key))).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
    });
    // One request per tenant reached the downstream (A's replay did not); only A's booked.
    expect(stack.downstream.calls(key)).toBe(2);
    expect(stack.downstream.bookings(key).map((b) => b.tenant)).toEqual([TENANT_A]);
    expect(await stack.services.store.get({ tenant: TENANT_B, tool: WRITE, idempotencyKey: key })).toMatchObject({ status: 'UNKNOWN' });
  });
});
