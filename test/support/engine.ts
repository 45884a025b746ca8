import { randomUUID } from 'node:crypto';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Clock } from '../../lambdas/core/clock';
import type { ExtraWrite } from '../../lambdas/engine/persistence';
import { Keys } from '../../lambdas/store/table-schema';

/** A clock the test moves by hand, so expiry and leases are exercised without waiting. */
export function manualClock(start = Date.now()) {
  let now = start;
  const clock: Clock = () => now;
  return {
    clock,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

/** A promise the test settles from outside: holds an executor mid-flight. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A fresh valid idempotency key, so tests sharing a table never meet. */
export const newKey = () => `key-${randomUUID()}`;

/** The idempotency item exactly as stored (attribute names included), or undefined. */
export async function storedItem(doc: DynamoDBDocumentClient, tableName: string, tenant: string, tool: string, key: string) {
  const { Item } = await doc.send(
    new GetCommand({ TableName: tableName, Key: Keys.idempotency(tenant, tool, key), ConsistentRead: true }),
  );
  return Item;
}

/** The business item a test tool commits with its SUCCEEDED record. */
export function orderWrite(tenant: string, orderId: string, extra: Record<string, unknown> = {}): ExtraWrite {
  // A business rule the store enforces: an order id is never reused (a write creates, it never overwrites).
  return { create: { key: Keys.order(tenant, orderId), item: { order_id: orderId, ...extra } } };
}

export async function orderItem(doc: DynamoDBDocumentClient, tableName: string, tenant: string, orderId: string) {
  const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: Keys.order(tenant, orderId), ConsistentRead: true }));
  return Item;
}
