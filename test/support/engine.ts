import { randomUUID } from 'node:crypto';
import type { Clock } from '../../lambdas/core/clock';
import type { IdempotencyPolicy, ToolEffect } from '../../lambdas/core/tool-policy';
import { IdempotencyEngine, type EngineOptions } from '../../lambdas/engine/engine';
import type { Executor, WriteRequest } from '../../lambdas/engine/write-request';
import type { ExtraWrite } from '../../lambdas/engine/persistence';
import { GetCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
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
  const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: Keys.idempotency(tenant, tool, key), ConsistentRead: true }));
  return Item;
}

/**
 * A fixture tool's order: a kind of its own in the table (the engine's tests use fixture tools of their own, never the
 * reference endpoint's), so it never meets the toolkit's `IDEM#` and `OUTBOX#` items.
 */
export const orderKey = (tenant: string, orderId: string) => ({ pk: `FIXTURE-ORDER#${tenant}#${orderId}`, sk: 'ORDER' });

/** The business item a test tool commits with its SUCCEEDED record. */
export function orderWrite(tenant: string, orderId: string, extra: Record<string, unknown> = {}): ExtraWrite {
  // A business rule the store enforces: an order id is never reused (a write creates, it never overwrites).
  return { create: { key: orderKey(tenant, orderId), item: { order_id: orderId, ...extra } } };
}

export async function orderItem(doc: DynamoDBDocumentClient, tableName: string, tenant: string, orderId: string) {
  const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: orderKey(tenant, orderId), ConsistentRead: true }));
  return Item;
}

/** The engine's two paths; every engine test runs on both. */
export const ENGINE_PATHS = [
  { path: 'claimed', effect: 'external' },
  { path: 'one-request', effect: 'local' },
] as const satisfies readonly { path: string; effect: ToolEffect }[];

/** An engine whose every call comes from a tool with this effect (the tool spec's `effect`). */
export function engineFor(effect: ToolEffect, options: EngineOptions): IdempotencyEngine {
  return new (class extends IdempotencyEngine {
    override run<R>(request: WriteRequest, policy: IdempotencyPolicy, execute: Executor<R>) {
      return super.run<R>({ ...request, effect }, policy, execute);
    }
  })(options);
}

/**
 * Where a fixture tool's effect lands, counted there (never from the engine's own events or answers). A tool on the
 * claimed path (`external`) calls a downstream once per run: `act` is that call, and the ledger counts the calls
 * that reached it. A tool on the one-request path (`local`) runs for every call, duplicates included, but only
 * computes: it acts by committing its item with the record, so its effects are the items found in the table (one per
 * run that committed; a run that failed or was refused committed none).
 */
export function effectLedger(effect: ToolEffect, table: { doc: DynamoDBDocumentClient; tableName: string }) {
  const pk = `FIXTURE-EFFECT#${randomUUID()}`;
  let runs = 0;
  let downstreamCalls = 0;
  return {
    /** One run's effect: the downstream call (claimed path), or the item to commit with the record (one-request path). */
    act(): { writes?: ExtraWrite[] } {
      const run = ++runs;
      if (effect === 'external') {
        downstreamCalls++;
        return {};
      }
      return { writes: [{ create: { key: { pk, sk: `RUN#${run}` }, item: { run } } }] };
    },
    /** The effects that happened: the downstream's calls, or the committed items in DynamoDB. */
    async count(): Promise<number> {
      if (effect === 'external') return downstreamCalls;
      const { Count } = await table.doc.send(
        new QueryCommand({
          TableName: table.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': pk },
          ConsistentRead: true,
          Select: 'COUNT',
        }),
      );
      return Count ?? 0;
    },
  };
}
