import {
  keyExpiryRule,
  storedStatesAllowing,
  type ExpiryPolicy,
  type IdempotencyRecord,
  type TransitionEvent,
} from '../core/state-machine';
import { TableSchema } from './table-schema';

/*
 * The condition expressions of the DynamoDB store's writes, rendered from the core's rules (the transition table, the
 * key-expiry rule) so that the table and the conditions cannot drift apart: what a write may start from, the owner
 * token's fence, the version of a record as read.
 */

export type ExpressionValues = Record<string, unknown>;

/**
 * Each write's status condition, rendered from the transition table (`storedStatesAllowing`): the states the write's
 * event may start from. Changing the table changes the conditions; the conformance suite checks both stores
 * against the table.
 */
function renderFromStates(event: TransitionEvent): { clause: string; values: ExpressionValues } {
  const states = storedStatesAllowing(event);
  if (states.length === 0) throw new Error(`the transition table allows ${event} from no stored state`);
  const names = states.map((_, i) => `:from${i}`);
  return {
    clause: names.length === 1 ? `#status = ${names[0]}` : `#status IN (${names.join(', ')})`,
    values: Object.fromEntries(states.map((state, i) => [names[i], state])),
  };
}

/** Every write but the claim (whose condition is the key-expiry rule, `renderKeyIsFree`); `expire` is TTL's. */
export type StoreWriteEvent = Exclude<TransitionEvent, 'claim' | 'expire'>;
/** A fence on a record as read: its condition, with the names and values it uses. */
export interface ReadFence {
  clause: string;
  names: Record<string, string>;
  values: ExpressionValues;
}

/** Rendered once per event: settle runs on every call. */
const FROM_STATES = new Map<StoreWriteEvent, { clause: string; values: ExpressionValues }>();
const fromStatesOf = (event: StoreWriteEvent) => FROM_STATES.get(event) ?? FROM_STATES.set(event, renderFromStates(event)).get(event)!;

/** `event`'s status condition and the owner token's fence (the record is the writer's). */
export function ownedFence(event: StoreWriteEvent, ownerToken: string) {
  const from = fromStatesOf(event);
  return { clause: `${from.clause} AND owner_token = :owner`, values: { ...from.values, ':owner': ownerToken } };
}

/**
 * The core's key-expiry rule (`keyExpiryRule`) as the claim condition: no item, or a record in one of the rule's
 * statuses whose deciding attribute is at or before the rule's bound.
 */
export function renderKeyIsFree(now: number, onExpired: ExpiryPolicy['onExpired'] | undefined) {
  const rule = keyExpiryRule(now, onExpired);
  const statusNames = rule.statuses.map((_, i) => `:free${i}`);
  return {
    ConditionExpression: `attribute_not_exists(pk) OR (#status IN (${statusNames.join(', ')}) AND #freeAfter <= :freeAtOrBefore)`,
    ExpressionAttributeNames: { '#status': 'status', '#freeAfter': RECORD_ATTRIBUTE[rule.field] },
    ExpressionAttributeValues: {
      ...Object.fromEntries(rule.statuses.map((status, i) => [statusNames[i], status])),
      ':freeAtOrBefore': rule.freeAtOrBefore,
    },
  };
}

/** The item attribute of each record field a condition compares. */
const RECORD_ATTRIBUTE = { retainUntil: 'retain_until', expiresAt: TableSchema.ttlAttribute } as const;

export const removeClause = (attributes: string[]) => (attributes.length === 0 ? '' : ` REMOVE ${attributes.join(', ')}`);

/**
 * The version `record` was read at, for a write making `event`: the states the table allows `event` from, the
 * owner token and the reconcile attempts (the reconciler's fence); `exact` (a person's decision) adds the status
 * and the last update as read, since attempts alone could come round again.
 */
export function readFence(record: IdempotencyRecord, event: StoreWriteEvent, { exact = false } = {}): ReadFence {
  const attempts = record.reconcileAttempts;
  const owned = ownedFence(event, record.ownerToken);
  const clauses = [
    owned.clause,
    attempts === undefined ? 'attribute_not_exists(reconcile_attempts)' : 'reconcile_attempts = :readAttempts',
  ];
  const values: ExpressionValues = { ...owned.values, ...(attempts === undefined ? {} : { ':readAttempts': attempts }) };
  if (exact) {
    clauses.push('#status = :readStatus', 'updated_at = :readUpdatedAt');
    values[':readStatus'] = record.status;
    values[':readUpdatedAt'] = record.updatedAt;
  }
  return { clause: clauses.join(' AND '), names: { '#status': 'status' }, values };
}
