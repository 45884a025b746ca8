import {
  PutCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type PutCommandInput,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { attemptsOf, isConditionRefusal, refusingItem, type Item } from './refusals';

/**
 * The core's lease rule (`leaseHasPassed`: a lease at or before now protects no one) as a DynamoDB condition on
 * `attribute`, compared with the expression value `:now`. Every claim that may take over a lease renders it here.
 */
export const leasePassedClause = (attribute: string): string => `${attribute} <= :now`;

export type ItemClaim =
  /**
   * `previous`: the item the claim replaced (an update's ALL_OLD), if any. `retried`: the SDK sent the write more
   * than once, so an earlier attempt whose answer was lost may still land later.
   */
  | { claimed: true; previous?: Item; retried: boolean }
  /** The holder's item, as the refused write found it. */
  | { claimed: false; existing: Item; retried: boolean };

/**
 * One claim by one conditional write: the mechanism behind the idempotency store's claim of a key and the outbox
 * consumer's claim of an event's delivery. The write's condition says when the key is free (no item, an expired
 * record, a passed lease); when it is not, the holder comes back with the refusal (ALL_OLD), so a duplicate costs
 * one request. `read` is a fallback for emulators that omit ALL_OLD; a holder gone in between means the key is free
 * again, so the claim is written again. Errors other than the refusal are thrown as they are, for the caller to
 * classify.
 */
export async function claimByCondition(
  doc: DynamoDBDocumentClient,
  write: { put: PutCommandInput } | { update: UpdateCommandInput },
  read: () => Promise<Item | undefined>,
): Promise<ItemClaim> {
  for (;;) {
    try {
      if ('put' in write) {
        const out = await doc.send(new PutCommand({ ...write.put, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }));
        return { claimed: true, retried: attemptsOf(out) > 1 };
      }
      const out = await doc.send(
        new UpdateCommand({ ...write.update, ReturnValues: 'ALL_OLD', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }),
      );
      const retried = attemptsOf(out) > 1;
      return out.Attributes ? { claimed: true, previous: out.Attributes, retried } : { claimed: true, retried };
    } catch (err) {
      if (!isConditionRefusal(err)) throw err;
      const existing = refusingItem(err) ?? (await read());
      if (existing) return { claimed: false, existing, retried: attemptsOf(err) > 1 };
    }
  }
}
