import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemoryApprovalStore, type ApprovalRecord, type ApprovalStore } from 'idempotent-mcp/engine';
import { DynamoDbApprovalStore } from 'idempotent-mcp/dynamodb';
import { newApproval } from '../../lambdas/core/approval';
import { createTestTable } from '../support/dynamodb';

/**
 * The approval stores a team's own server uses through the public subpaths (the DynamoDB adapter, the in-memory one
 * for tests) keep the same promises: the first round asked for is the one everyone sees, a decision is taken once and
 * only the way its round was asked, a late or stale one never, and a new round keeps every earlier entry.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
beforeAll(async () => {
  table = await createTestTable();
});
afterAll(async () => table?.drop());

const T0 = Date.UTC(2030, 0, 1);
const binding = () => ({ tenant: 'tenant-a', tool: 'request_payment', idempotencyKey: `k-${randomUUID()}`, fingerprint: 'fp-1' });
const ask = (b: ReturnType<typeof binding>, previous?: ApprovalRecord, now = T0, mode: 'url' | 'form' = 'url') =>
  newApproval(b, { mode, summary: 'Pay 12.50 EUR to payee-7', now, previous })!;
const approve = (by: string, at: number, via: 'url' | 'form' = 'url') => ({ status: 'approved' as const, by, at, via });

describe.each([
  ['in memory', (): ApprovalStore => new InMemoryApprovalStore()],
  ['DynamoDB', (): ApprovalStore => new DynamoDbApprovalStore({ client: table.doc, tableName: table.tableName })],
])('the %s approval store', (_name, make) => {
  it('keeps the first round asked for: a concurrent second one gets it instead of its own', async () => {
    const store = make();
    const b = binding();
    const first = ask(b);
    expect(await store.open(first, undefined)).toEqual(first);
    const rival = await store.open(ask(b), undefined);
    expect(rival.nonce).toBe(first.nonce);
    expect((await store.current(b))!.nonce).toBe(first.nonce);
  });

  it('takes one decision, once, the way the round was asked, before its expiry; the first stands', async () => {
    const store = make();
    const record = await store.open(ask(binding()), undefined);
    expect(await store.decide({ ...record, nonce: 'x'.repeat(22) }, approve('mallory', T0 + 1))).toEqual({
      applied: false,
      reason: 'unknown',
    });
    expect(await store.decide(record, approve('mcp-client', T0 + 1, 'form'))).toMatchObject({ applied: false, reason: 'mode' });
    const decisions = await Promise.all(
      ['alice', 'bob', 'carol'].map((by, i) => store.decide(record, { ...approve(by, T0 + 2), status: i === 1 ? 'declined' : 'approved' })),
    );
    expect(decisions.filter((d) => d.applied)).toHaveLength(1);
    for (const other of decisions.filter((d) => !d.applied)) expect(other).toMatchObject({ reason: 'decided' });
    const stored = (await store.current(record))!;
    expect(stored.decidedAt).toBe(T0 + 2);
    expect(stored.log.map((entry) => `${entry.round} ${entry.event} ${entry.via}`)).toEqual(['1 requested url', `1 ${stored.status} url`]);
  });

  it('refuses a decision after the expiry, and one for a round replaced by a newer one, which keeps the old entries', async () => {
    const store = make();
    const b = binding();
    const record = await store.open(ask(b), undefined);
    expect(await store.decide(record, approve('alice', record.expiresAt))).toMatchObject({ applied: false, reason: 'expired' });
    const newer = await store.open(ask(b, record, record.expiresAt), record);
    expect(newer).toMatchObject({ round: 2, status: 'pending' });
    expect(await store.decide(record, approve('alice', record.expiresAt + 1))).toEqual({ applied: false, reason: 'unknown' });
    // A round opened over a stale read (the approval changed since) is not written: the newer one stands.
    expect((await store.open(ask(b, record, record.expiresAt + 2), record)).nonce).toBe(newer.nonce);
    expect((await store.current(b))!.log.map((entry) => `${entry.round} ${entry.event}`)).toEqual(['1 requested', '2 requested']);
  });

  it('writes no round over a read taken before a decision: the decision stands, and the call gets it', async () => {
    const store = make();
    const b = binding();
    const first = await store.open(ask(b), undefined);
    const staleRead = (await store.current(b))!;
    // The person approves on the page between the agent's read and its write of a new round (other arguments).
    expect(await store.decide(first, approve('alice', T0 + 1))).toMatchObject({ applied: true });
    const winner = await store.open(ask({ ...b, fingerprint: 'fp-2' }, staleRead, T0 + 2), staleRead);
    expect(winner).toMatchObject({ round: 1, status: 'approved', decidedBy: 'alice' });
    expect((await store.current(b))!.log.map((entry) => `${entry.round} ${entry.event}`)).toEqual(['1 requested', '1 approved']);
  });

  it('lets one run use a yes, once: the use is recorded on the approval, with the run', async () => {
    const store = make();
    const b = binding();
    const pending = await store.open(ask(b), undefined);
    // Only an approved round can be used.
    expect(await store.use(pending, { at: T0 + 1, by: 'run-0' })).toMatchObject({ applied: false });
    const { record: approved } = (await store.decide(pending, approve('alice', T0 + 2))) as { record: ApprovalRecord };
    const uses = await Promise.all(['run-1', 'run-2', 'run-3'].map((by, i) => store.use(approved, { at: T0 + 3 + i, by })));
    expect(uses.filter((u) => u.applied)).toHaveLength(1);
    const stored = (await store.current(b))!;
    const winner = uses.find((u) => u.applied)!.record!;
    expect(stored).toMatchObject({ usedAt: winner.usedAt, usedBy: winner.usedBy });
    expect(stored.log.map((entry) => `${entry.round} ${entry.event}`)).toEqual(['1 requested', '1 approved', '1 used']);
    expect(stored.log[2]).toMatchObject({ by: stored.usedBy, at: stored.usedAt });
    // A later call, also from a read taken before the use, cannot use it again.
    expect(await store.use(approved, { at: T0 + 10, by: 'run-4' })).toMatchObject({ applied: false, record: { usedBy: stored.usedBy } });
  });

  it('writes no round over a read taken before a run used the yes: the use stays in the log', async () => {
    const store = make();
    const b = binding();
    const { record: approved } = (await store.decide(await store.open(ask(b), undefined), approve('alice', T0 + 1))) as {
      record: ApprovalRecord;
    };
    expect(await store.use(approved, { at: T0 + 2, by: 'run-1' })).toMatchObject({ applied: true });
    const winner = await store.open(ask({ ...b, fingerprint: 'fp-2' }, approved, T0 + 3), approved);
    expect(winner).toMatchObject({ round: 1, usedBy: 'run-1' });
    const next = await store.open(ask({ ...b, fingerprint: 'fp-2' }, winner, T0 + 4), winner);
    expect(next).toMatchObject({ round: 2, status: 'pending' });
    expect((await store.current(b))!.log.map((entry) => `${entry.round} ${entry.event}`)).toEqual([
      '1 requested',
      '1 approved',
      '1 used',
      '2 requested',
    ]);
  });

  it('hands out copies: changing what it returned changes nothing stored', async () => {
    const store = make();
    const record = await store.open(ask(binding()), undefined);
    const read = (await store.current(record))!;
    read.status = 'approved';
    read.log.push({ ...read.log[0]!, event: 'approved', by: 'mallory' });
    expect((await store.current(record))!).toMatchObject({ status: 'pending', log: [{ event: 'requested' }] });
  });
});
