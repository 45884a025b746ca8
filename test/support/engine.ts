import { orderKey } from '../../reference/tools/orders';
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../lambdas/core/clock';
import {
  IdempotencyEngine,
  type EngineOptions,
  type Executor,
  type IdempotencyPolicy,
  type ToolEffect,
  type WriteRequest,
} from '../../lambdas/engine/engine';
import type { ExtraWrite } from '../../lambdas/engine/persistence';
import type { DocumentClient } from '../../lambdas/store/document-client';
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
export async function storedItem(doc: DocumentClient, tableName: string, tenant: string, tool: string, key: string) {
  const { Item } = await doc.get({ TableName: tableName, Key: Keys.idempotency(tenant, tool, key), ConsistentRead: true });
  return Item;
}

/** The business item a test tool commits with its SUCCEEDED record. */
export function orderWrite(tenant: string, orderId: string, extra: Record<string, unknown> = {}): ExtraWrite {
  // A business rule the store enforces: an order id is never reused (a write creates, it never overwrites).
  return { create: { key: orderKey(tenant, orderId), item: { order_id: orderId, ...extra } } };
}

export async function orderItem(doc: DocumentClient, tableName: string, tenant: string, orderId: string) {
  const { Item } = await doc.get({ TableName: tableName, Key: orderKey(tenant, orderId), ConsistentRead: true });
  return Item;
}

/** The engine's two paths; every engine test runs on both. */
export const ENGINE_PATHS = [
  { path: 'claimed', effect: 'external' },
  { path: 'one-request', effect: 'local' },
] as const satisfies readonly { path: string; effect: ToolEffect }[];

/** An engine whose every call comes from a tool with this effect (the tool spec's `effect`). */
export function engineFor(effect: ToolEffect, options: EngineOptions): IdempotencyEngine {
  let commits = 0;
  const observer = options.observer;
  const engine = new (class extends IdempotencyEngine {
    override run<R>(request: WriteRequest, policy: IdempotencyPolicy, execute: Executor<R>) {
      return super.run<R>({ ...request, effect }, policy, execute);
    }
  })({
    ...options,
    observer: {
      record(event) {
        if (event.type === 'executed' || event.type === 'failed') commits++;
        observer?.record(event);
      },
    },
  });
  effects.set(engine, { effect, commits: () => commits });
  return engine;
}

const effects = new WeakMap<IdempotencyEngine, { effect: ToolEffect; commits: () => number }>();

/**
 * How often the tool acted. Claimed path: every run of the tool (each may call a downstream). One-request path: the
 * tool runs for every call, duplicates included, but only computes; it acts by committing its outcome, so the count
 * is the outcomes this engine committed (executed and failed events).
 */
export function ran(engine: IdempotencyEngine, runs: number): number {
  const entry = effects.get(engine);
  return entry?.effect === 'local' ? entry.commits() : runs;
}
