import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineWriteTool } from '../../lambdas/mcp/define-write-tool';
import { manualClock, newKey } from '../support/engine';
import { fixturePaymentArgs, FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callRead, callWrite, connectClient } from '../support/mcp';

/** Tools with keySource 'operation_id' accept only ids minted by issue_operation_id for this tenant and tool. */
let stack: FixtureStack;
let alice: Client;
let bob: Client;
/** fixture_payment: keyed by an operation id; what ran under an id is what reached the fixture downstream. */
const PAY = FixtureTool.payment;
const runs = (id: string) => stack.downstream.calls(id);
const time = manualClock();
const TENANT_A = 'tenant-op-alice';

const otherOperationTool = defineWriteTool({
  name: 'probe_operation_other',
  title: 'Another operation-id tool',
  description: 'Test tool.',
  input: { note: z.string().optional() },
  result: z.object({ ok: z.boolean() }),
  keySource: 'operation_id',
  annotations: { destructiveHint: true, openWorldHint: true },
  execute: async () => ({ result: { ok: true } }),
});

beforeAll(async () => {
  stack = await startFixtureStack({ tools: [otherOperationTool], services: { clock: time.clock } });
  [alice, bob] = await Promise.all([connectClient(stack, TENANT_A), connectClient(stack, 'tenant-op-bob')]);
});
afterAll(async () => {
  await Promise.all([alice?.close(), bob?.close()]);
  await stack?.stop();
});

async function issue(client: Client, tool: string): Promise<string> {
  const answer = await callRead(client, 'issue_operation_id', { tool });
  expect(answer.isError).toBe(false);
  return (answer.structured as { operation_id: string }).operation_id;
}

const callPayment = (client: Client, operationId: unknown) =>
  callWrite(client, PAY, { ...fixturePaymentArgs(''), operation_id: operationId });

describe('operation ids', () => {
  it('an issued id runs the tool once and replays after; it fits the key rules', async () => {
    const answer = await callRead(alice, 'issue_operation_id', { tool: PAY });
    const { operation_id: id, expires_at } = answer.structured as { operation_id: string; expires_at: string };
    expect(id).toMatch(/^[A-Za-z0-9._:-]{8,128}$/);
    expect(Date.parse(expires_at)).toBeGreaterThan(time.clock());

    expect(await callPayment(alice, id)).toMatchObject({ outcome: 'succeeded', replayed: false, idempotency_key: id });
    expect(await callPayment(alice, id)).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(runs(id)).toBe(1);
    const status = await callRead(alice, 'get_operation_status', { tool: PAY, idempotency_key: id });
    expect(status.structured).toMatchObject({ status: 'succeeded' });
  });

  it('a forged, tampered, missing or client-chosen id is rejected with UNKNOWN_OPERATION_ID and runs nothing', async () => {
    const genuine = await issue(alice, PAY);
    const flip = (id: string, at: number) => `${id.slice(0, at)}${id[at] === 'A' ? 'B' : 'A'}${id.slice(at + 1)}`;
    const forged = [flip(genuine, genuine.length - 10), `op_zzzzzz.${'A'.repeat(22)}.${'B'.repeat(43)}`, newKey(), undefined, 12345];
    for (const id of forged) {
      const answer = await callPayment(alice, id);
      expect(answer).toMatchObject({ outcome: 'rejected', retryable: false, error: { code: 'UNKNOWN_OPERATION_ID' } });
      expect(answer.error!.message).toContain('issue_operation_id');
    }
    expect(runs(genuine)).toBe(0);
  });

  it('speaks of operation_id to a tool that takes one: status lookup, a call without one, a conflict', async () => {
    const id = await issue(alice, 'probe_operation_other');
    expect(await callWrite(alice, 'probe_operation_other', { operation_id: id, note: 'first' })).toMatchObject({ outcome: 'succeeded' });

    // Looked up by the field the tool takes, and echoed as asked.
    const status = await callRead(alice, 'get_operation_status', { tool: 'probe_operation_other', operation_id: id });
    expect(status.isError).toBe(false);
    expect(status.structured).toMatchObject({ status: 'succeeded', operation_id: id });
    const both = await callRead(alice, 'get_operation_status', { tool: 'probe_operation_other', operation_id: id, idempotency_key: id });
    expect(both).toMatchObject({ isError: true, text: expect.stringContaining('as operation_id') });

    // The same id with other arguments: the message names operation_id and where a new one comes from.
    const conflict = await callWrite(alice, 'probe_operation_other', { operation_id: id, note: 'second' });
    expect(conflict).toMatchObject({ outcome: 'conflict', error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    expect(conflict.error!.message).toMatch(/operation_id was already used.*issue_operation_id/);
    expect(conflict.error!.message).not.toContain('idempotency_key');

    // No id at all: nothing is echoed as if it were a key.
    const missing = await callWrite(alice, 'probe_operation_other', { note: 'third' });
    expect(missing).toMatchObject({ outcome: 'rejected', error: { code: 'UNKNOWN_OPERATION_ID' } });
    expect(missing).not.toHaveProperty('idempotency_key');
  });

  it("another tenant's id is rejected", async () => {
    const alicesId = await issue(alice, PAY);
    expect(await callPayment(bob, alicesId)).toMatchObject({ outcome: 'rejected', error: { code: 'UNKNOWN_OPERATION_ID' } });
  });

  it("another tool's id is rejected", async () => {
    const idForOther = await issue(alice, 'probe_operation_other');
    expect(await callPayment(alice, idForOther)).toMatchObject({ outcome: 'rejected', error: { code: 'UNKNOWN_OPERATION_ID' } });
    expect(await callWrite(alice, 'probe_operation_other', { operation_id: idForOther })).toMatchObject({ outcome: 'succeeded' });
  });

  it('an expired unused id is rejected; an expired id that already ran still replays its result', async () => {
    const unused = await issue(alice, PAY);
    const used = await issue(alice, PAY);
    const first = await callPayment(alice, used);
    expect(first.outcome).toBe('succeeded');

    time.advance(2 * 3600 * 1000);
    const late = await callPayment(alice, unused);
    expect(late).toMatchObject({ outcome: 'rejected', error: { code: 'UNKNOWN_OPERATION_ID' } });
    expect(late.error!.message).toMatch(/expired/);
    expect(await callPayment(alice, used)).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.result });
    expect(runs(unused)).toBe(0);
  });

  it('an expired id whose record is past its replay window is refused, not run a second time', async () => {
    const used = await issue(alice, PAY);
    expect(await callPayment(alice, used)).toMatchObject({ outcome: 'succeeded', replayed: false });

    // Past the 24 h retention the record no longer replays (DynamoDB deletes it late, DynamoDB Local never):
    // the id, expired long before, must not name a fresh execution.
    time.advance(25 * 3600 * 1000);
    const late = await callPayment(alice, used);
    expect(late).toMatchObject({ outcome: 'rejected', error: { code: 'UNKNOWN_OPERATION_ID' } });
    expect(late.error!.message).toMatch(/expired/);
    expect(runs(used)).toBe(1);
  });

  it('issue_operation_id refuses tools that take a client key, and unknown tools', async () => {
    for (const tool of [FixtureTool.write, 'no_such_tool']) {
      const answer = await callRead(alice, 'issue_operation_id', { tool });
      expect(answer.isError).toBe(true);
      expect(answer.text).toMatch(/^INVALID_ARGUMENTS/);
    }
  });
});
