import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalStore } from 'idempotent-mcp/engine';
import { InMemoryApprovalStore } from 'idempotent-mcp/engine/testing';
import { DynamoDbApprovalStore } from 'idempotent-mcp/dynamodb';
import { newApproval } from '../../lambdas/core/approval';
import { createTestTable } from '../support/dynamodb';

/**
 * The approval stores a team's own server uses through the public subpaths (the DynamoDB adapter, the in-memory one
 * for tests) keep the same promises: the first approval asked for is the one everyone sees, a decision is taken once,
 * a late or stale one never.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

const T0 = Date.UTC(2030, 0, 1);
const ask = (key: string, fingerprint = 'fp-1', now = T0) =>
  newApproval({ tenant: 'tenant-a', tool: 'request_payment', idempotencyKey: key, fingerprint }, { mode: 'url', summary: 'Pay 12.50 EUR to payee-7', now });

describe.each([
  ['in memory', () => new InMemoryApprovalStore()],
  ['DynamoDB', () => new DynamoDbApprovalStore({ client: table.doc, tableName: table.tableName })],
] as const)('the %s approval store', (_name, make: () => ApprovalStore) => {
  it('keeps the first approval asked for: a concurrent second one gets it instead of its own', async () => {
    const store = make();
    const key = `k-${randomUUID()}`;
    const first = ask(key);
    expect(await store.open(first, undefined)).toEqual(first);
    const rival = await store.open(ask(key), undefined);
    expect(rival.nonce).toBe(first.nonce);
    expect((await store.current(first))!.nonce).toBe(first.nonce);
  });

  it('takes one decision, once: by its nonce, before its expiry; the first stands', async () => {
    const store = make();
    const record = await store.open(ask(`k-${randomUUID()}`), undefined);
    expect(await store.decide(record, 'x'.repeat(22), { status: 'approved', by: 'mallory', at: T0 + 1 })).toEqual({ applied: false, reason: 'unknown' });
    const decisions = await Promise.all(
      ['alice', 'bob', 'carol'].map((by, i) => store.decide(record, record.nonce, { status: i === 1 ? 'declined' : 'approved', by, at: T0 + 2 })),
    );
    expect(decisions.filter((d) => d.applied)).toHaveLength(1);
    const winner = decisions.find((d) => d.applied)!;
    for (const other of decisions.filter((d) => !d.applied)) expect(other).toMatchObject({ reason: 'decided' });
    const stored = (await store.current(record))!;
    expect(stored).toMatchObject({ status: winner.applied && winner.record.status, decidedAt: T0 + 2 });
    expect(stored.log.map((entry) => entry.event)).toEqual(['requested', stored.status]);
  });

  it('refuses a decision after the expiry, and one for an approval replaced by a newer one', async () => {
    const store = make();
    const key = `k-${randomUUID()}`;
    const record = await store.open(ask(key), undefined);
    expect(await store.decide(record, record.nonce, { status: 'approved', by: 'alice', at: record.expiresAt })).toMatchObject({ applied: false, reason: 'expired' });
    const newer = await store.open(ask(key, 'fp-1', record.expiresAt), record.nonce);
    expect(newer.nonce).not.toBe(record.nonce);
    expect(await store.decide(record, record.nonce, { status: 'approved', by: 'alice', at: record.expiresAt + 1 })).toEqual({ applied: false, reason: 'unknown' });
    expect((await store.current(record))!).toMatchObject({ nonce: newer.nonce, status: 'pending' });
  });

  it('hands out copies: changing what it returned changes nothing stored', async () => {
    const store = make();
    const record = await store.open(ask(`k-${randomUUID()}`), undefined);
    const read = (await store.current(record))!;
    read.status = 'approved';
    read.log.push({ at: T0, event: 'approved', by: 'mallory' });
    expect((await store.current(record))!).toMatchObject({ status: 'pending', log: [{ event: 'requested' }] });
  });
});
