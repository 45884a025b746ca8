import { describe, expect, it } from 'vitest';
import {
  HOUR,
  identity,
  orderWrite,
  processingRecord as processing,
  rivalOf,
  settledAtOnce,
  T0,
  unknownError,
  type SuiteContext,
} from './store-conformance-fixtures';
import { randomUUID } from 'node:crypto';
import { OwnershipLostError, TransactionRejectedError } from '../../core/errors';
import { keyIsFree } from '../../core/state-machine';

/** The store conformance suite's writes of one executor: claim, settle, release, leases and the one-request commit. */
export function describeWrites({ open, unknownRecord, recordIn }: SuiteContext): void {
  describe('claim', () => {
    it('creates the PROCESSING record on a free key and reads back what was claimed', async () => {
      const store = await open();
      const record = processing({ traceId: 'trace-1' });
      expect(await store.claim(record, T0)).toEqual({ claimed: true });
      expect(await store.get(identity(record))).toEqual(record);
    });

    it("keeps tenants, tools and keys apart, tool names of MCP's charset included", async () => {
      const store = await open();
      const first = processing({ tool: 'createOrder' });
      await store.claim(first, T0);
      for (const other of [
        { ...first, tenant: 'tenant-b' },
        { ...first, tool: 'orders.create' },
        { ...first, tool: 'create-order_v2' },
      ]) {
        expect(await store.claim({ ...other, ownerToken: randomUUID() }, T0)).toEqual({ claimed: true });
      }
      expect((await store.get(identity(first)))?.ownerToken).toBe(first.ownerToken);
    });

    it('refuses a held key and returns the holder; a retried claim of the same owner counts as ours', async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      const rival = await store.claim({ ...record, ownerToken: randomUUID(), fingerprint: 'fp-2' }, T0 + 1);
      expect(rival).toMatchObject({
        claimed: false,
        existing: { ownerToken: record.ownerToken, fingerprint: 'fp-1', status: 'PROCESSING' },
      });
      expect(await store.claim(record, T0 + 2)).toMatchObject({ claimed: true });
    });

    it("frees a settled key by the tool's expiry policy: 'execute' at the end of retention, otherwise at the expiry", async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      await store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: { n: 1 } }, T0 + 10);
      const again = () => ({ ...record, ownerToken: randomUUID() });
      expect(await store.claim(again(), record.retainUntil - 1, { onExpired: 'execute' })).toMatchObject({ claimed: false });
      expect(await store.claim(again(), record.retainUntil, { onExpired: 'review' })).toMatchObject({ claimed: false });
      expect(await store.claim(again(), record.retainUntil)).toMatchObject({ claimed: false });
      expect(await store.claim(again(), record.expiresAt * 1000, { onExpired: 'review' })).toEqual({ claimed: true });

      const second = processing();
      await store.claim(second, T0);
      await store.settle(identity(second), second.ownerToken, { status: 'FAILED', error: { code: 'X', message: 'no' } }, T0 + 10);
      expect(await store.claim({ ...second, ownerToken: randomUUID() }, second.retainUntil, { onExpired: 'execute' })).toEqual({
        claimed: true,
      });
    });

    it("frees exactly the keys the core's rule (keyIsFree) frees, at each boundary and under each policy", async () => {
      const store = await open();
      // Retention ends off the second; the expiry (a review window) an hour later, on the second.
      const retainUntil = T0 + HOUR + 500;
      const expiresAt = Math.floor((retainUntil + HOUR) / 1000);
      const nows = [retainUntil - 1, retainUntil, retainUntil + 1, expiresAt * 1000 - 1, expiresAt * 1000, expiresAt * 1000 + 1];
      for (const status of ['SUCCEEDED', 'FAILED'] as const) {
        for (const onExpired of ['execute', 'review', undefined] as const) {
          for (const now of nows) {
            /** A key settled with `status` long ago, as the store holds it. */
            const settledKey = async () => {
              const record = processing({ retainUntil, expiresAt });
              await store.claim(record, T0);
              await store.settle(
                identity(record),
                record.ownerToken,
                status === 'SUCCEEDED' ? { status, result: 1 } : { status, error: unknownError },
                T0 + 1,
              );
              return (await store.get(identity(record)))!;
            };
            const free = keyIsFree(await settledKey(), now, onExpired);
            const { claimed } = await store.claim(rivalOf(await settledKey()), now, { onExpired });
            const { committed } = await store.commitOnce(settledAtOnce(identity(await settledKey())), now, { onExpired });
            expect({ status, onExpired, at: now - T0, claimed, committed }).toEqual({
              status,
              onExpired,
              at: now - T0,
              claimed: free,
              committed: free,
            });
          }
        }
      }
    });

    it('never frees an unsettled key by time', async () => {
      const { store, record } = await unknownRecord();
      const late = record.retainUntil + 365 * 24 * HOUR;
      for (const onExpired of ['execute', 'review'] as const) {
        expect(await store.claim(rivalOf(record), late, { onExpired })).toMatchObject({ claimed: false });
      }
    });
  });

  describe('settle', () => {
    it('moves the owned PROCESSING record to SUCCEEDED or FAILED with what replays', async () => {
      const store = await open();
      const ok = processing();
      await store.claim(ok, T0);
      await store.settle(identity(ok), ok.ownerToken, { status: 'SUCCEEDED', result: { order: 'o-1' } }, T0 + 5);
      expect(await store.get(identity(ok))).toMatchObject({ status: 'SUCCEEDED', result: { order: 'o-1' }, updatedAt: T0 + 5 });
      const bad = processing();
      await store.claim(bad, T0);
      await store.settle(
        identity(bad),
        bad.ownerToken,
        { status: 'FAILED', error: { code: 'DECLINED', message: 'no' }, errorType: 'terminal' },
        T0 + 5,
      );
      expect(await store.get(identity(bad))).toMatchObject({ status: 'FAILED', error: { code: 'DECLINED' }, errorType: 'terminal' });
    });

    it('is fenced on the owner: another owner, or a record no longer PROCESSING, gets OwnershipLostError', async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      await expect(store.settle(identity(record), randomUUID(), { status: 'SUCCEEDED', result: 1 }, T0 + 1)).rejects.toBeInstanceOf(
        OwnershipLostError,
      );
      await store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 1);
      await expect(store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: 2 }, T0 + 2)).rejects.toBeInstanceOf(
        OwnershipLostError,
      );
      expect((await store.get(identity(record)))?.result).toBe(1);
    });

    it("commits the tool's writes with the record, or nothing when one of them exists already", async () => {
      const store = await open();
      const shared = `item-${randomUUID()}`;
      const first = processing();
      await store.claim(first, T0);
      await store.settle(identity(first), first.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 1, [orderWrite(shared)]);
      const second = processing();
      await store.claim(second, T0);
      const fresh = `item-${randomUUID()}`;
      await expect(
        store.settle(identity(second), second.ownerToken, { status: 'SUCCEEDED', result: 2 }, T0 + 1, [
          orderWrite(fresh),
          orderWrite(shared),
        ]),
      ).rejects.toBeInstanceOf(TransactionRejectedError);
      expect((await store.get(identity(second)))?.status).toBe('PROCESSING');
      // The refused settlement created nothing: its fresh item is still free for a later one.
      await store.settle(identity(second), second.ownerToken, { status: 'SUCCEEDED', result: 2 }, T0 + 2, [orderWrite(fresh)]);
      expect((await store.get(identity(second)))?.status).toBe('SUCCEEDED');
    });
  });

  describe('release', () => {
    it('deletes the owned PROCESSING record so the key executes again; anyone else is refused', async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      expect(await store.release(identity(record), randomUUID())).toBe(false);
      expect(await store.release(identity(record), record.ownerToken)).toBe(true);
      expect(await store.get(identity(record))).toBeUndefined();
      expect(await store.claim({ ...record, ownerToken: randomUUID() }, T0 + 1)).toEqual({ claimed: true });
    });
  });

  describe('leases', () => {
    it('markUnknown: only the owner moves PROCESSING to UNKNOWN, due for a check, with its in-flight window', async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      const details = { error: unknownError, errorType: 'uncertain' as const, nextCheckAt: T0 + 5000, inFlightUntil: T0 + 9000 };
      expect(await store.markUnknown(identity(record), randomUUID(), details, T0 + 1)).toBe(false);
      expect(await store.markUnknown(identity(record), record.ownerToken, details, T0 + 1)).toBe(true);
      expect(await store.get(identity(record))).toMatchObject({
        status: 'UNKNOWN',
        nextCheckAt: T0 + 5000,
        inFlightUntil: T0 + 9000,
        error: unknownError,
        errorType: 'uncertain',
      });
      expect(await store.markUnknown(identity(record), record.ownerToken, details, T0 + 2)).toBe(false);
    });

    it('takeOver: a new owner only once the lease has passed; the old owner is then fenced out', async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      const next = randomUUID();
      expect(await store.takeOver(identity(record), record.ownerToken, next, T0 + 120_000, record.leaseExpiresAt - 1)).toBe(false);
      expect(await store.takeOver(identity(record), record.ownerToken, next, T0 + 120_000, record.leaseExpiresAt)).toBe(true);
      expect(await store.get(identity(record))).toMatchObject({ status: 'PROCESSING', ownerToken: next, leaseExpiresAt: T0 + 120_000 });
      await expect(
        store.settle(identity(record), record.ownerToken, { status: 'SUCCEEDED', result: 1 }, T0 + 61_000),
      ).rejects.toBeInstanceOf(OwnershipLostError);
      expect(await store.takeOver(identity(record), record.ownerToken, randomUUID(), T0 + 200_000, T0 + 130_000)).toBe(false);
    });

    it('expireLease: a passed lease, as read, becomes UNKNOWN due now with its in-flight window; a live or renewed lease stays', async () => {
      const store = await open();
      const record = processing();
      await store.claim(record, T0);
      expect(await store.expireLease(record, record.leaseExpiresAt - 1, record.leaseExpiresAt + 5000)).toBe(false);
      const renewed = randomUUID();
      await store.takeOver(identity(record), record.ownerToken, renewed, T0 + 120_000, record.leaseExpiresAt);
      expect(await store.expireLease(record, T0 + 200_000, T0 + 205_000)).toBe(false);
      const current = (await store.get(identity(record)))!;
      expect(await store.expireLease(current, T0 + 120_000, T0 + 125_000)).toBe(true);
      expect(await store.get(identity(record))).toMatchObject({
        status: 'UNKNOWN',
        errorType: 'lease_expired',
        nextCheckAt: T0 + 120_000,
        inFlightUntil: T0 + 125_000,
      });
      expect(await store.expireLease(current, T0 + 120_001, T0 + 125_000)).toBe(false);
    });
  });

  describe('commitOnce (the one-request path)', () => {
    it("commits the settled record and the tool's writes on a free key", async () => {
      const store = await open();
      const record = settledAtOnce();
      const item = `item-${randomUUID()}`;
      expect(await store.commitOnce(record, T0, { onExpired: 'execute' }, [orderWrite(item)])).toEqual({ committed: true });
      expect(await store.get(identity(record))).toEqual(record);
      // The item committed with it: another transaction creating it is refused, and commits nothing.
      const other = settledAtOnce();
      await expect(store.commitOnce(other, T0, {}, [orderWrite(item)])).rejects.toBeInstanceOf(TransactionRejectedError);
      expect(await store.get(identity(other))).toBeUndefined();
    });

    it('on a held key returns the holder and writes nothing; a retried commit of the same owner counts as committed', async () => {
      const store = await open();
      for (const holder of ['PROCESSING', 'SUCCEEDED', 'UNKNOWN', 'NEEDS_REVIEW'] as const) {
        const held = await recordIn(store, holder);
        const item = `item-${randomUUID()}`;
        const rival = settledAtOnce({ ...identity(held), result: { order: 'o-2' } });
        expect(await store.commitOnce(rival, T0 + 10, { onExpired: 'execute' }, [orderWrite(item)]), holder).toEqual({
          committed: false,
          existing: await store.get(identity(held)),
        });
        expect(await store.get(identity(held)), holder).toEqual(held);
        // Its item was not written: a later transaction still creates it.
        const later = settledAtOnce();
        expect(await store.commitOnce(later, T0, {}, [orderWrite(item)]), holder).toEqual({ committed: true });
      }
      const mine = settledAtOnce();
      await store.commitOnce(mine, T0);
      expect(await store.commitOnce(mine, T0 + 1)).toEqual({ committed: true });
    });

    it('returns the record to a call with other arguments (a conflict), writing nothing', async () => {
      const store = await open();
      const first = settledAtOnce();
      await store.commitOnce(first, T0);
      const conflicting = settledAtOnce({ ...identity(first), fingerprint: 'fp-2', result: { order: 'o-2' } });
      expect(await store.commitOnce(conflicting, T0 + 1, { onExpired: 'execute' })).toEqual({ committed: false, existing: first });
      expect(await store.get(identity(first))).toEqual(first);
    });

    it("frees an expired key by the same rule as claim: 'execute' at the end of retention, otherwise at the expiry", async () => {
      const store = await open();
      const first = settledAtOnce();
      await store.commitOnce(first, T0);
      const again = () => settledAtOnce({ ...identity(first), result: { order: 'o-2' } });
      expect(await store.commitOnce(again(), first.retainUntil - 1, { onExpired: 'execute' })).toMatchObject({ committed: false });
      expect(await store.commitOnce(again(), first.retainUntil, { onExpired: 'review' })).toMatchObject({ committed: false });
      expect(await store.commitOnce(again(), first.retainUntil)).toMatchObject({ committed: false });
      const second = again();
      expect(await store.commitOnce(second, first.retainUntil, { onExpired: 'execute' })).toEqual({ committed: true });
      expect(await store.get(identity(first))).toEqual(second);
      const third = again();
      expect(await store.commitOnce(third, second.expiresAt * 1000, { onExpired: 'review' })).toEqual({ committed: true });
      expect((await store.get(identity(first)))?.ownerToken).toBe(third.ownerToken);
    });
  });
}
