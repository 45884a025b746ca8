import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type ApprovalRecord, newApproval } from '../core/approval';
import type { ApprovalDecision, ApprovalStore } from '../approval-store';

const T0 = Date.UTC(2030, 0, 1);
type Binding = { tenant: string; tool: string; idempotencyKey: string; fingerprint: string };
/** A new operation: records of different tests never share a key. */
const binding = (): Binding => ({ tenant: 'tenant-a', tool: 'request_payment', idempotencyKey: `k-${randomUUID()}`, fingerprint: 'fp-1' });
/** The next round for `b` as the confirmation gate makes it (`previous`: the approval as read). */
const ask = (b: Binding, previous?: ApprovalRecord, now = T0) =>
  newApproval(b, { mode: 'url', summary: 'Pay 12.50 EUR to payee-7', now, previous })!;
const approve = (by: string, at: number, via: 'url' | 'form' = 'url'): ApprovalDecision => ({ status: 'approved', by, at, via });
const events = (record: ApprovalRecord | undefined) => record?.log.map((entry) => `${entry.round} ${entry.event}`);
const approved = async (store: ApprovalStore, b: Binding, by: string) => {
  const decided = await store.decide(await store.open(ask(b), undefined), approve(by, T0 + 1));
  expect(decided.applied).toBe(true);
  return (decided as { record: ApprovalRecord }).record;
};

/**
 * What every adapter of the approval store port (`ApprovalStore`) must do, as a vitest suite: call it at the top
 * level of a test file with a factory of your store. The first round asked for is the one everyone sees; a round is
 * decided once, only the way it was asked and before its expiry; a yes is used by one run, recorded on the approval;
 * no round is written over an approval that changed since it was read; tenants never share an approval. The
 * in-memory store and the DynamoDB adapter both pass it.
 * @public
 */
export function describeApprovalStoreConformance(
  name: string,
  options: {
    /** The store under test; called once per test. Approvals of different tests never share a key. */
    store: () => ApprovalStore | Promise<ApprovalStore>;
    /**
     * Another store on the same table that is someone else's (another `keyPrefix`: another gateway's upstream, an
     * endpoint): the suite checks that the same tenant, tool and key in both are two approvals, neither read, decided
     * nor used through the other. Called once per test, after `store`.
     */
    neighbour?: () => ApprovalStore | Promise<ApprovalStore>;
  },
): void {
  const open = async () => options.store();

  describe(`${name}: the approval store contract`, () => {
    it('keeps the first round asked for: a concurrent second one gets it instead of its own', async () => {
      const store = await open();
      const b = binding();
      const first = ask(b);
      expect(await store.open(first, undefined)).toEqual(first);
      const rival = await store.open(ask(b), undefined);
      expect(rival.nonce).toBe(first.nonce);
      expect((await store.current(b))!.nonce).toBe(first.nonce);
    });

    it('takes one decision, once, the way the round was asked, before its expiry; the first stands', async () => {
      const store = await open();
      const record = await store.open(ask(binding()), undefined);
      expect(await store.decide({ ...record, nonce: 'x'.repeat(22) }, approve('mallory', T0 + 1))).toEqual({
        applied: false,
        reason: 'unknown',
      });
      expect(await store.decide(record, approve('mcp-client', T0 + 1, 'form'))).toMatchObject({ applied: false, reason: 'mode' });
      const decisions = await Promise.all(
        ['alice', 'bob', 'carol'].map((by, i) =>
          store.decide(record, { ...approve(by, T0 + 2), status: i === 1 ? 'declined' : 'approved' }),
        ),
      );
      expect(decisions.filter((d) => d.applied)).toHaveLength(1);
      for (const other of decisions.filter((d) => !d.applied)) expect(other).toMatchObject({ reason: 'decided' });
      const stored = (await store.current(record))!;
      expect(stored.decidedAt).toBe(T0 + 2);
      expect(stored.log.map((entry) => `${entry.round} ${entry.event} ${entry.via}`)).toEqual([
        '1 requested url',
        `1 ${stored.status} url`,
      ]);
    });

    it('takes a decision up to the last instant before the expiry', async () => {
      const store = await open();
      const record = await store.open(ask(binding()), undefined);
      expect(await store.decide(record, approve('alice', record.expiresAt - 1))).toMatchObject({
        applied: true,
        record: { status: 'approved', decidedBy: 'alice' },
      });
    });

    it('refuses a decision at the expiry, and one for a round replaced by a newer one, which keeps the old entries', async () => {
      const store = await open();
      const b = binding();
      const record = await store.open(ask(b), undefined);
      expect(await store.decide(record, approve('alice', record.expiresAt))).toMatchObject({ applied: false, reason: 'expired' });
      const newer = await store.open(ask(b, record, record.expiresAt), record);
      expect(newer).toMatchObject({ round: 2, status: 'pending' });
      expect(await store.decide(record, approve('alice', record.expiresAt + 1))).toEqual({ applied: false, reason: 'unknown' });
      // A round opened over a stale read (the approval changed since) is not written: the newer one stands.
      expect((await store.open(ask(b, record, record.expiresAt + 2), record)).nonce).toBe(newer.nonce);
      expect(events(await store.current(b))).toEqual(['1 requested', '2 requested']);
    });

    it('writes no round over a read taken before a decision (same round, other status): the decision stands, and the call gets it', async () => {
      const store = await open();
      const b = binding();
      const first = await store.open(ask(b), undefined);
      const staleRead = (await store.current(b))!;
      // The person approves on the page between the agent's read and its write of a new round (other arguments).
      expect(await store.decide(first, approve('alice', T0 + 1))).toMatchObject({ applied: true });
      const winner = await store.open(ask({ ...b, fingerprint: 'fp-2' }, staleRead, T0 + 2), staleRead);
      expect(winner).toMatchObject({ round: 1, status: 'approved', decidedBy: 'alice' });
      expect(events(await store.current(b))).toEqual(['1 requested', '1 approved']);
    });

    it('lets one run use a yes, once: the use is recorded on the approval, with the run', async () => {
      const store = await open();
      const b = binding();
      const pending = await store.open(ask(b), undefined);
      // Only an approved round can be used.
      expect(await store.use(pending, { at: T0 + 1, by: 'run-0' })).toMatchObject({ applied: false });
      const declined = await store.open(ask(binding()), undefined);
      await store.decide(declined, { ...approve('bob', T0 + 1), status: 'declined' });
      expect(await store.use(declined, { at: T0 + 2, by: 'run-0' })).toMatchObject({ applied: false, record: { status: 'declined' } });
      const { record: yes } = (await store.decide(pending, approve('alice', T0 + 2))) as { record: ApprovalRecord };
      const uses = await Promise.all(['run-1', 'run-2', 'run-3'].map((by, i) => store.use(yes, { at: T0 + 3 + i, by })));
      expect(uses.filter((u) => u.applied)).toHaveLength(1);
      const stored = (await store.current(b))!;
      const winner = uses.find((u) => u.applied)!.record!;
      expect(stored).toMatchObject({ usedAt: winner.usedAt, usedBy: winner.usedBy });
      expect(['run-1', 'run-2', 'run-3']).toContain(stored.usedBy);
      expect(events(stored)).toEqual(['1 requested', '1 approved', '1 used']);
      expect(stored.log[2]).toMatchObject({ by: stored.usedBy, at: stored.usedAt });
      // A later call, also from a read taken before the use, cannot use it again.
      expect(await store.use(yes, { at: T0 + 10, by: 'run-4' })).toMatchObject({ applied: false, record: { usedBy: stored.usedBy } });
      expect(await store.current(b)).toEqual(stored);
    });

    it('writes no round over a read taken before a run used the yes: the use stays in the log', async () => {
      const store = await open();
      const b = binding();
      const yes = await approved(store, b, 'alice');
      expect(await store.use(yes, { at: T0 + 2, by: 'run-1' })).toMatchObject({ applied: true });
      const winner = await store.open(ask({ ...b, fingerprint: 'fp-2' }, yes, T0 + 3), yes);
      expect(winner).toMatchObject({ round: 1, usedBy: 'run-1' });
      const next = await store.open(ask({ ...b, fingerprint: 'fp-2' }, winner, T0 + 4), winner);
      expect(next).toMatchObject({ round: 2, status: 'pending' });
      expect(events(await store.current(b))).toEqual(['1 requested', '1 approved', '1 used', '2 requested']);
    });

    it("keeps tenants apart: another tenant's approval under the same tool and key is its own, decided and used apart", async () => {
      const store = await open();
      const mine = binding();
      const theirs = { ...mine, tenant: 'tenant-b' };
      const myRound = await store.open(ask(mine), undefined);
      expect(await store.current(theirs)).toBeUndefined();
      const theirRound = await store.open(ask(theirs), undefined);
      expect(theirRound).toMatchObject({ tenant: 'tenant-b', status: 'pending' });
      expect(theirRound.nonce).not.toBe(myRound.nonce);
      // My round's nonce names nothing of theirs.
      expect(await store.decide({ ...theirRound, nonce: myRound.nonce }, approve('mallory', T0 + 1))).toEqual({
        applied: false,
        reason: 'unknown',
      });
      const { record: yes } = (await store.decide(myRound, approve('alice', T0 + 1))) as { record: ApprovalRecord };
      expect(await store.current(theirs)).toMatchObject({ nonce: theirRound.nonce, status: 'pending' });
      const { record: theirYes } = (await store.decide(theirRound, approve('bob', T0 + 2))) as { record: ApprovalRecord };
      expect(await store.use({ ...theirYes, nonce: yes.nonce }, { at: T0 + 3, by: 'run-x' })).toMatchObject({ applied: false });
      expect(await store.use(yes, { at: T0 + 3, by: 'run-1' })).toMatchObject({ applied: true });
      expect((await store.current(theirs))!.usedAt).toBeUndefined();
      expect(await store.use(theirYes, { at: T0 + 4, by: 'run-2' })).toMatchObject({ applied: true });
      expect(await store.current(mine)).toMatchObject({ tenant: 'tenant-a', decidedBy: 'alice', usedBy: 'run-1' });
      expect(await store.current(theirs)).toMatchObject({ tenant: 'tenant-b', decidedBy: 'bob', usedBy: 'run-2' });
    });

    it('hands out copies: changing what it returned changes nothing stored', async () => {
      const store = await open();
      const record = await store.open(ask(binding()), undefined);
      const read = (await store.current(record))!;
      read.status = 'approved';
      read.log.push({ ...read.log[0]!, event: 'approved', by: 'mallory' });
      expect((await store.current(record))!).toMatchObject({ status: 'pending', log: [{ event: 'requested' }] });
    });

    const { neighbour } = options;
    if (neighbour) {
      it("never sees a neighbour's approvals: the same tenant, tool and key in both are two approvals", async () => {
        const store = await open();
        const other = await neighbour();
        const b = binding();
        const mine = await store.open(ask(b), undefined);
        expect(await other.current(b)).toBeUndefined();
        expect(await other.decide(mine, approve('mallory', T0 + 1))).toEqual({ applied: false, reason: 'unknown' });
        const theirs = await other.open(ask(b), undefined);
        expect(theirs.nonce).not.toBe(mine.nonce);
        const { record: yes } = (await store.decide(mine, approve('alice', T0 + 1))) as { record: ApprovalRecord };
        // Their store neither uses my yes nor shows it; mine is still unused.
        expect(await other.use(yes, { at: T0 + 2, by: 'run-x' })).toMatchObject({ applied: false });
        expect(await other.current(b)).toMatchObject({ nonce: theirs.nonce, status: 'pending', log: [{ event: 'requested' }] });
        expect(await store.use(yes, { at: T0 + 3, by: 'run-1' })).toMatchObject({ applied: true });
        expect(await other.decide(theirs, { ...approve('bob', T0 + 4), status: 'declined' })).toMatchObject({ applied: true });
        expect(await store.current(b)).toMatchObject({ nonce: mine.nonce, status: 'approved', decidedBy: 'alice', usedBy: 'run-1' });
        expect(events(await store.current(b))).toEqual(['1 requested', '1 approved', '1 used']);
        expect(events(await other.current(b))).toEqual(['1 requested', '1 declined']);
      });
    }
  });
}
