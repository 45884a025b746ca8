import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApprovalRecord, newApproval } from '../../lambdas/confirmation/core/approval';
import { REVIEW_LOG_MAX_ENTRIES } from '../../lambdas/core/state-machine';
import { DynamoDbApprovalStore } from '../../lambdas/store/dynamodb-approval-store';
import { createTestTable } from '../support/dynamodb';

/**
 * The DynamoDB approval store on DynamoDB Local: every round of an operation's approval stays in its log, and
 * concurrent writers (a new round, a decision) never lose an entry.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
let store: DynamoDbApprovalStore;
beforeAll(async () => {
  table = await createTestTable();
  store = new DynamoDbApprovalStore({ client: table.doc, tableName: table.tableName });
});
afterAll(() => table.drop());

const T0 = Date.UTC(2026, 11, 4, 12);
const binding = (fingerprint = 'fp-a') => ({
  tenant: 'tenant-a',
  tool: 'request_payment',
  idempotencyKey: `op-${randomUUID()}`,
  fingerprint,
});
const round = (
  b: ReturnType<typeof binding>,
  previous: ApprovalRecord | undefined,
  now: number,
  mode: 'url' | 'form' = 'url',
  summary = 'Pay 12.50 EUR to payee-7',
) => newApproval(b, { mode, summary, now, previous })!;
const entries = (record: ApprovalRecord) =>
  record.log.map((e) => `${e.round} ${e.event} ${e.via} ${e.fingerprint}${e.by ? ` ${e.by}` : ''}`);

describe('every round stays in the log', () => {
  it('a new round (other arguments, or after a decline) keeps every earlier request and decision', async () => {
    const a = binding('fp-a');
    const first = await store.open(round(a, undefined, T0), undefined);
    const approved = await store.decide(first, { status: 'approved', by: 'alice@tenant-a', at: T0 + 1000, via: 'url' });
    expect(approved.applied).toBe(true);
    // The agent's next call has other arguments: a new round, and Alice's approval stays on record.
    const other = { ...a, fingerprint: 'fp-b' };
    const second = await store.open(
      round(other, await store.current(a), T0 + 2000, 'url', 'Pay 99.00 EUR to payee-9'),
      await store.current(a),
    );
    expect(second).toMatchObject({ round: 2, status: 'pending', fingerprint: 'fp-b' });
    await store.decide(second, { status: 'declined', by: 'bob@tenant-a', at: T0 + 3000, via: 'url' });
    const third = await store.open(round(other, await store.current(a), T0 + 4000), await store.current(a));
    expect(third.round).toBe(3);
    const now = (await store.current(a))!;
    expect(entries(now)).toEqual([
      '1 requested url fp-a',
      '1 approved url fp-a alice@tenant-a',
      '2 requested url fp-b',
      '2 declined url fp-b bob@tenant-a',
      '3 requested url fp-b',
    ]);
    expect(now.log[2]).toMatchObject({ summary: 'Pay 99.00 EUR to payee-9', at: T0 + 2000 });
    expect(now.log[1]).toMatchObject({ at: T0 + 1000 });
  });

  it('two rounds opened at once from the same read: one is written, the other call gets it; no entry lost', async () => {
    const a = binding();
    const first = await store.open(round(a, undefined, T0), undefined);
    await store.decide(first, { status: 'declined', by: 'alice@tenant-a', at: T0 + 1, via: 'url' });
    const read = (await store.current(a))!;
    const rivals = [round(a, read, T0 + 2), round(a, read, T0 + 3)];
    const opened = await Promise.all(rivals.map((r) => store.open(r, read)));
    expect(opened[0]!.nonce).toBe(opened[1]!.nonce);
    const now = (await store.current(a))!;
    expect(entries(now)).toEqual(['1 requested url fp-a', '1 declined url fp-a alice@tenant-a', '2 requested url fp-a']);
  });

  it('a round opened from a read taken before the decision is not written: the decision stands in the log', async () => {
    const a = binding();
    const first = await store.open(round(a, undefined, T0), undefined);
    const staleRead = (await store.current(a))!;
    // The person approves on the page, between the agent's read and its write of a new round (other arguments).
    expect((await store.decide(first, { status: 'approved', by: 'alice@tenant-a', at: T0 + 1, via: 'url' })).applied).toBe(true);
    const winner = await store.open(round({ ...a, fingerprint: 'fp-b' }, staleRead, T0 + 2), staleRead);
    expect(winner).toMatchObject({ round: 1, status: 'approved', decidedBy: 'alice@tenant-a' });
    expect(entries((await store.current(a))!)).toEqual(['1 requested url fp-a', '1 approved url fp-a alice@tenant-a']);
  });

  it('the log is bounded as the review log is, and never by dropping a decision: a full log takes no new round', async () => {
    const a = binding();
    let previous: ApprovalRecord | undefined;
    let rounds = 0;
    for (;;) {
      const next = newApproval(a, { mode: 'url', summary: 'Pay 12.50 EUR to payee-7', now: T0 + rounds * 10, previous });
      if (!next) break;
      const opened = await store.open(next, previous);
      await store.decide(opened, { status: 'declined', by: `person-${rounds}@tenant-a`, at: T0 + rounds * 10 + 1, via: 'url' });
      previous = (await store.current(a))!;
      rounds += 1;
    }
    // A round opens only with room for its request, its decision and a run's use of a yes (three entries).
    expect(rounds).toBe(Math.floor((REVIEW_LOG_MAX_ENTRIES - 3) / 2) + 1);
    expect(previous!.log).toHaveLength(2 * rounds);
    expect(previous!.log.filter((e) => e.event === 'declined').map((e) => e.by)).toEqual(
      Array.from({ length: rounds }, (_, i) => `person-${i}@tenant-a`),
    );
  });
});

describe('a round is decided only the way it was asked', () => {
  it('a page round refuses a form decision, and a form round a page decision; nothing is written', async () => {
    const page = binding();
    const asked = await store.open(round(page, undefined, T0, 'url'), undefined);
    expect(await store.decide(asked, { status: 'approved', by: 'mcp-client', at: T0 + 1, via: 'form' })).toMatchObject({
      applied: false,
      reason: 'mode',
    });
    const form = binding();
    const inForm = await store.open(round(form, undefined, T0, 'form'), undefined);
    expect(await store.decide(inForm, { status: 'approved', by: 'alice@tenant-a', at: T0 + 1, via: 'url' })).toMatchObject({
      applied: false,
      reason: 'mode',
    });
    for (const b of [page, form]) expect((await store.current(b))!).toMatchObject({ status: 'pending', log: [{ event: 'requested' }] });
  });
});
