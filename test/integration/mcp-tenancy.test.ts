import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack';
import { newKey } from '../support/engine';
import { tools as registry } from '../../reference/tools';
import { callRead, callWrite, connectClient, createProbeTools, ledger, orderArgs, startTestStack } from '../support/mcp';

/** The tenant comes only from the token; one tenant never reads, replays or conflicts with another's records. */
let stack: LocalStack;
let alice: Client;
let bob: Client;
const probes = createProbeTools();
const TENANT_A = 'tenant-alice';
const TENANT_B = 'tenant-bob';

type Order = { order_id: string };

beforeAll(async () => {
  stack = await startTestStack({ tools: [...registry, ...probes.tools] });
  [alice, bob] = await Promise.all([connectClient(stack, TENANT_A), connectClient(stack, TENANT_B)]);
});
afterAll(async () => {
  await Promise.all([alice?.close(), bob?.close()]);
  await stack?.stop();
});

describe('tenant isolation', () => {
  it('an argument named like a tenant is refused, naming it: the token decides, and nothing ran under the key', async () => {
    const key = newKey();
    const refused = await callWrite<Order>(alice, 'create_order', orderArgs(key, { tenant: TENANT_B, tenant_id: TENANT_B }));
    expect(refused).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS', message: expect.stringMatching(/tenant/) } });
    expect((await ledger(stack)).orders.filter((o) => o.idempotency_key === key)).toEqual([]);
    // The key stayed free: without those arguments it runs, as the token's tenant.
    const made = await callWrite<Order>(alice, 'create_order', orderArgs(key));
    expect(made).toMatchObject({ outcome: 'succeeded', replayed: false });
    const orders = (await ledger(stack)).orders.filter((o) => o.idempotency_key === key);
    expect(orders).toEqual([expect.objectContaining({ tenant: TENANT_A, order_id: made.result!.order_id })]);
    // The executing tool sees the token's tenant too.
    const probe = await callWrite<{ tenant_seen: string }>(alice, 'probe_write', { idempotency_key: newKey(), behavior: 'succeed' });
    expect(probe.result!.tenant_seen).toBe(TENANT_A);
    expect(await callWrite(alice, 'probe_write', { idempotency_key: newKey(), behavior: 'succeed', tenant: TENANT_B })).toMatchObject({
      outcome: 'rejected',
      error: { code: 'INVALID_ARGUMENTS' },
    });
  });

  it("the same key in another tenant is another operation: no replay of A's result, no conflict", async () => {
    const key = newKey();
    const fromA = await callWrite<Order>(alice, 'create_order', orderArgs(key));
    const sameArgsFromB = await callWrite<Order>(bob, 'create_order', orderArgs(key));
    expect(sameArgsFromB).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(sameArgsFromB.result!.order_id).not.toBe(fromA.result!.order_id);

    const otherKey = newKey();
    await callWrite(alice, 'create_order', orderArgs(otherKey));
    const otherArgsFromB = await callWrite(bob, 'create_order', orderArgs(otherKey, { currency: 'USD' }));
    expect(otherArgsFromB).toMatchObject({ outcome: 'succeeded', replayed: false });

    const orders = (await ledger(stack)).orders.filter((o) => o.idempotency_key === key);
    expect(orders.map((o) => o.tenant).sort()).toEqual([TENANT_A, TENANT_B]);
  });

  it("B cannot read A's order or A's operation status", async () => {
    const key = newKey();
    const fromA = await callWrite<Order>(alice, 'create_order', orderArgs(key));

    const read = await callRead(bob, 'get_order', { order_id: fromA.result!.order_id });
    expect(read.isError).toBe(true);
    expect(read.text).toMatch(/^NOT_FOUND/);
    const status = await callRead(bob, 'get_operation_status', { tool: 'create_order', idempotency_key: key });
    expect(status.structured).toMatchObject({ status: 'not_found' });
    expect(status.structured).not.toHaveProperty('result');

    // A still sees both.
    expect((await callRead(alice, 'get_order', { order_id: fromA.result!.order_id })).isError).toBe(false);
    expect((await callRead(alice, 'get_operation_status', { tool: 'create_order', idempotency_key: key })).structured).toMatchObject({
      status: 'succeeded',
    });
  });

  it("B's uncertain failure under a key does not touch A's record under the same key", async () => {
    const key = newKey();
    await callWrite(alice, 'probe_write', { idempotency_key: key, behavior: 'succeed' });
    expect(await callWrite(bob, 'probe_write', { idempotency_key: key, behavior: 'uncertain' })).toMatchObject({ outcome: 'unknown' });
    expect(await callWrite(alice, 'probe_write', { idempotency_key: key, behavior: 'succeed' })).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
    });
    expect(probes.runs(TENANT_A, key)).toBe(1);
    expect(probes.runs(TENANT_B, key)).toBe(1);
  });
});
