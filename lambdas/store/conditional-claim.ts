import { ConditionalCheckFailedError, type DocumentClient, type Item, type PutInput, type UpdateInput } from './document-client';

/**
 * The core's lease rule (`leaseHasPassed`: a lease at or before now protects no one) as a DynamoDB condition on
 * `attribute`, compared with the expression value `:now`. Every claim that may take over a lease renders it here.
 */
export const leasePassedClause = (attribute: string): string => `${attribute} <= :now`;

export type ItemClaim =
  /** `previous`: the item the claim replaced (an update's ALL_OLD), if any. */
  | { claimed: true; previous?: Item }
  /** The holder's item, as the refused write found it. */
  | { claimed: false; existing: Item };

/**
 * One claim by one conditional write: the mechanism behind the idempotency store's claim of a key and the outbox
 * consumer's claim of an event's delivery. The write's condition says when the key is free (no item, an expired
 * record, a passed lease); when it is not, the holder comes back with the refusal (ALL_OLD), so a duplicate costs
 * one request. `read` is a fallback for emulators that omit ALL_OLD; a holder gone in between means the key is free
 * again, so the claim is written again. Errors other than the refusal are thrown as they are, for the caller to
 * classify.
 */
export async function claimByCondition(
  doc: DocumentClient,
  write: { put: PutInput } | { update: UpdateInput },
  read: () => Promise<Item | undefined>,
): Promise<ItemClaim> {
  for (;;) {
    try {
      if ('put' in write) {
        await doc.put({ ...write.put, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });
        return { claimed: true };
      }
      const out = await doc.update({ ...write.update, ReturnValues: 'ALL_OLD', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });
      return out.Attributes ? { claimed: true, previous: out.Attributes } : { claimed: true };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedError)) throw err;
      const existing = err.Item ?? (await read());
      if (existing) return { claimed: false, existing };
    }
  }
}
