/**
 * The one pattern for storage keys: `KIND#part#part`, each key an item's partition and sort key (`ExtraWrite`'s
 * `key`, lambdas/engine/persistence.ts). '#' cannot occur in the parts: tenants and keys follow the
 * idempotency-key charset and tool names MCP's tool-name charset, neither of which has it.
 */
export const Keys = {
  idempotency: (tenant: string, tool: string, idempotencyKey: string) => ({
    pk: `IDEM#${tenant}#${tool}#${idempotencyKey}`,
    sk: 'IDEM',
  }),
  /** The review log of an idempotency record: same partition, so it outlives a decision that released the key. */
  reviewLog: (tenant: string, tool: string, idempotencyKey: string) => ({
    pk: `IDEM#${tenant}#${tool}#${idempotencyKey}`,
    sk: 'REVIEW',
  }),
  outboxEvent: (eventId: string) => ({ pk: `OUTBOX#${eventId}`, sk: 'EVENT' }),
  /** The consumer's dedup marker: written before an event's effect runs. */
  deliveredEvent: (eventId: string) => ({ pk: `OUTBOX#${eventId}`, sk: 'DELIVERY' }),
};

/**
 * What the partition key of every outbox event of the store with `keyPrefix` starts with, and their sort key: the
 * deployed relay's stream filter and the store's ownership rule (lambdas/store/record-item.ts) both read these.
 */
export const outboxEventPkPrefix = (keyPrefix = '') => `${keyPrefix}${Keys.outboxEvent('').pk}`;
/** The sort key of every outbox event item. */
export const OUTBOX_EVENT_SK = Keys.outboxEvent('').sk;
