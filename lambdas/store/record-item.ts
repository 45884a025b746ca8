import type { IdempotencyRecord } from '../core/state-machine';
import { Keys, OUTBOX_EVENT_SK, outboxEventPkPrefix } from '../core/keys';
import type { RecordIdentity } from '../engine/persistence';
import type { Item } from './refusals';
import { attentionPk, TableSchema } from './table-schema';

/** A record's item key: `IDEM#tenant#tool#key`, after the store's key prefix. */
export const recordKeyOf = (id: RecordIdentity, keyPrefix = '') => {
  const key = Keys.idempotency(id.tenant, id.tool, id.idempotencyKey);
  return keyPrefix ? { pk: `${keyPrefix}${key.pk}`, sk: key.sk } : key;
};

const RECORD_KEY = Keys.idempotency('', '', '');
/** What the partition key of every record of the store with `keyPrefix` starts with (`IDEM#`, after the prefix). */
const recordPkPrefix = (keyPrefix = '') => `${keyPrefix}${RECORD_KEY.pk.replace(/#+$/, '#')}`;

/** Whether `item` is an idempotency record of the store with `keyPrefix` (the table and its index hold other items too). */
export const isRecordItemOf = (item: Item, keyPrefix = ''): boolean =>
  typeof item.pk === 'string' && item.pk.startsWith(recordPkPrefix(keyPrefix)) && item.sk === RECORD_KEY.sk;

/**
 * An outbox event's item key (`OUTBOX#<id>` / `EVENT`) and its delivery claim's (`DELIVERY`), after the key prefix of
 * the store whose tool committed it: the event carries whose it is, so only that store's relay and consumer take it.
 */
export const outboxEventKeyOf = (eventId: string, keyPrefix = '') => withPrefix(Keys.outboxEvent(eventId), keyPrefix);
export const deliveryKeyOf = (eventId: string, keyPrefix = '') => withPrefix(Keys.deliveredEvent(eventId), keyPrefix);
const withPrefix = (key: { pk: string; sk: string }, keyPrefix: string) => (keyPrefix ? { pk: `${keyPrefix}${key.pk}`, sk: key.sk } : key);

/**
 * Whether `item` is an outbox event of the store with `keyPrefix`: the one ownership rule of the outbox, applied by
 * the stream relay's event-source filter (deployed), the relay handler and the store's reads.
 */
export const isOutboxEventItemOf = (item: Item, keyPrefix = ''): boolean =>
  typeof item.pk === 'string' && item.pk.startsWith(outboxEventPkPrefix(keyPrefix)) && item.sk === OUTBOX_EVENT_SK;

/**
 * Tenant, tool and key live in the item's key (`IDEM#tenant#tool#key`; '#' cannot occur in them) and are not
 * repeated as attributes: every claim sends the item and every replay reads it back.
 */
export function recordToItem(record: IdempotencyRecord, keyPrefix = '', attentionIndex = true): Item {
  const key = recordKeyOf(record, keyPrefix);
  // Properties listed one by one: `{ ...key, <15 more> }` costs tens of microseconds in V8 (Node 20), on every claim.
  const item: Item = {
    pk: key.pk,
    sk: key.sk,
    fingerprint: record.fingerprint,
    status: record.status,
    owner_token: record.ownerToken,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
    lease_expires_at: record.leaseExpiresAt,
    retain_until: record.retainUntil,
    [TableSchema.ttlAttribute]: record.expiresAt,
    trace_id: record.traceId,
    result: record.result,
    error: record.error,
    error_type: record.errorType,
    reconcile_attempts: record.reconcileAttempts,
    next_check_at: record.nextCheckAt,
    in_flight_until: record.inFlightUntil,
    memo: record.memo,
  };
  if (!attentionIndex) return item;
  if (record.status === 'PROCESSING') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('LEASE', key.pk, keyPrefix);
    item[TableSchema.attentionIndex.sortKey] = record.leaseExpiresAt;
  } else if (record.status === 'UNKNOWN') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('UNKNOWN', key.pk, keyPrefix);
    item[TableSchema.attentionIndex.sortKey] = record.nextCheckAt ?? record.updatedAt;
  } else if (record.status === 'NEEDS_REVIEW') {
    item[TableSchema.attentionIndex.partitionKey] = attentionPk('REVIEW', key.pk, keyPrefix);
    item[TableSchema.attentionIndex.sortKey] = record.updatedAt;
  }
  return item;
}

export function itemToRecord(item: Item): IdempotencyRecord {
  const opt = <T>(name: string) => (item[name] === undefined || item[name] === null ? undefined : (item[name] as T));
  const [, tenant, tool, idempotencyKey] = String(item.pk).split('#');
  return {
    tenant: tenant as string,
    tool: tool as string,
    idempotencyKey: idempotencyKey as string,
    fingerprint: item.fingerprint as string,
    status: item.status as IdempotencyRecord['status'],
    ownerToken: item.owner_token as string,
    createdAt: Number(item.created_at),
    updatedAt: Number(item.updated_at),
    leaseExpiresAt: Number(item.lease_expires_at),
    retainUntil: Number(item.retain_until),
    // UNKNOWN and NEEDS_REVIEW records carry no TTL: deleting them would free a key whose effect may exist.
    expiresAt: item[TableSchema.ttlAttribute] === undefined ? Number.POSITIVE_INFINITY : Number(item[TableSchema.ttlAttribute]),
    traceId: opt('trace_id'),
    result: opt('result'),
    error: opt('error'),
    errorType: opt('error_type'),
    reconcileAttempts: opt<number>('reconcile_attempts'),
    nextCheckAt: opt<number>('next_check_at'),
    inFlightUntil: opt<number>('in_flight_until'),
    memo: opt('memo'),
  };
}
