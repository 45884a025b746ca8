import { Logger } from '@aws-lambda-powertools/logger';
import { vi } from 'vitest';
import type { Clock } from '../../../lambdas/core/clock';
import { StoreUnavailableError } from '../../../lambdas/core/errors';
import { leaseHasPassed } from '../../../lambdas/core/lease';
import type { WriteToolResult } from '../../../lambdas/core/result-contract';
import type { IdempotencyRecord, RecordState, TransitionEvent } from '../../../lambdas/core/state-machine';
import type { InMemoryIdempotencyStore } from '../../../lambdas/engine/in-memory-store';
import type { ExtraWrite, IdempotencyStore, RecordIdentity, RecordQueries, ReviewStore } from '../../../lambdas/engine/persistence';
import { Reconciler } from '../../../lambdas/reconciler/reconciler';
import { type Fault, TIMES } from './races-scenarios';
import type { World } from './races-world';

/*
 * The parts of the world the race exploration builds around the real engine (races-world.ts): the downstream and
 * its ledger of effects, the clock, the actors whose every await the scheduler orders, and the store and reconciler
 * as each actor sees them.
 */

export interface Effect {
  seq: number;
  key: string;
  /** The operation: the caller's key slot and its arguments (`0A`), whatever key it was sent with. */
  intent: string;
  id: string;
  /** The key's retention epoch it belongs to: 0, then one more each time the key was claimed again after expiry. */
  epoch: number;
}

/**
 * The effects: a downstream system's ledger, and the items local tools committed with their records. `dedup`
 * answers a second request with our key with the first effect of the key's epoch (its dedup window ends with our
 * retention, as a payment provider's idempotency keys expire).
 */
export class Downstream {
  readonly ledger: Effect[] = [];
  constructor(
    readonly dedup: boolean,
    private readonly epochOf: (key: string) => number,
  ) {}

  act(key: string, intent: string): Effect {
    const earlier = this.dedup ? this.lookup(key) : undefined;
    if (earlier) return earlier;
    return this.add(key, intent, `effect-${this.ledger.length + 1}`);
  }

  /** An item a local tool committed in the same transaction as its record. */
  committed(key: string, intent: string, id: string) {
    if (!this.ledger.some((e) => e.id === id)) this.add(key, intent, id);
  }

  private add(key: string, intent: string, id: string): Effect {
    const effect = { seq: this.ledger.length + 1, key, intent, id, epoch: this.epochOf(key) };
    this.ledger.push(effect);
    return effect;
  }

  /** What the reconcile hook (or a person) asks: is there an effect with our key, in its current epoch? */
  lookup(key: string): Effect | undefined {
    const epoch = this.epochOf(key);
    return this.ledger.find((e) => e.key === key && e.epoch === epoch);
  }
}

export interface WorldClock {
  clock: Clock;
  advance(ms: number): void;
}

/** The manual clock; with fake timers the engine's deadline timers move with it. */
export function worldClock(start: number, fakeTimers: boolean): WorldClock {
  let now = start;
  return {
    clock: () => now,
    advance(ms) {
      now += ms;
      if (fakeTimers) vi.advanceTimersByTime(ms);
    },
  };
}

/** JSON with object keys sorted: DynamoDB gives a map's keys back in any order. */
export const stable = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  ) ?? 'undefined';

export const silentLogger = new Logger({ logLevel: 'SILENT' });
export const never = <T>() => new Promise<T>(() => {});

/** A violation of an invariant; the message names it. */
export class InvariantViolation extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvariantViolation';
  }
}

export interface Observation {
  /** Which store method, what the record was before and after (one atomic step), as seen under the store lock. */
  method: string;
  event?: TransitionEvent;
  before: RecordState;
  after: RecordState;
  ownerChanged: boolean;
}

/** One actor's view of the world: its awaits are counted, scheduled and faulted here. */
export class Actor {
  private awaits = 0;
  dead = false;
  readonly trace: string[] = [];
  constructor(
    readonly name: string,
    private readonly world: World,
    private readonly fault: Fault | undefined,
  ) {}

  /**
   * One await: waits for the scheduler, then applies `step` unless the actor crashed. `storeCall` says whether a
   * store fault applies (downstream steps only crash).
   */
  async step<T>(label: string, apply: () => Promise<T>, storeCall: boolean): Promise<T> {
    if (this.dead) return never<T>();
    const index = this.awaits++;
    await this.world.scheduler.schedule(Promise.resolve(), `${this.name}:${label}`);
    if (this.dead) return never<T>();
    const fault = this.fault?.at === index ? this.fault : undefined;
    this.trace.push(`${label}${fault ? ` [${fault.mode}]` : ''}`);
    if (fault?.mode === 'crash_before') return this.crash<T>();
    if (fault?.mode === 'store_error_before' && storeCall) throw new StoreUnavailableError('injected: the store did not answer');
    const result = await this.world.locked(apply);
    if (fault?.mode === 'crash_after') return this.crash<T>();
    if (fault?.mode === 'store_error_after' && storeCall)
      throw new StoreUnavailableError('injected: the write was applied, its answer lost');
    return result;
  }

  private crash<T>(): Promise<T> {
    this.dead = true;
    return never<T>();
  }
}

/** The store as one actor sees it: each call is an await of that actor, applied under the store lock and observed. */
export class ActorStore implements IdempotencyStore, ReviewStore, RecordQueries {
  constructor(
    private readonly actor: Actor,
    private readonly world: World,
    private readonly inner: IdempotencyStore & ReviewStore,
    /** The run's store, for the reconciler's queries: reads of no fence, outside any actor's step (as before, when it read the index itself). */
    private readonly queries: RecordQueries,
  ) {}

  assertQueryable: RecordQueries['assertQueryable'] = (reader) => this.queries.assertQueryable(reader);
  findAttention: RecordQueries['findAttention'] = (status, query) => this.queries.findAttention(status, query);
  attentionPages: RecordQueries['attentionPages'] = (status, query) => this.queries.attentionPages(status, query);
  countAttention: RecordQueries['countAttention'] = (status) => this.queries.countAttention(status);

  private call<T>(
    method: string,
    identity: RecordIdentity,
    event: TransitionEvent | undefined,
    apply: () => Promise<T>,
    writes?: ExtraWrite[],
  ): Promise<T> {
    return this.actor.step(method, () => this.world.observe(method, identity, event, apply, writes), true);
  }

  claim: IdempotencyStore['claim'] = (record, now, options) =>
    this.call('claim', record, 'claim', () => this.inner.claim(record, now, options));
  commitOnce: IdempotencyStore['commitOnce'] = (record, now, options, writes) =>
    this.call('commitOnce', record, undefined, () => this.inner.commitOnce(record, now, options, writes), writes);
  get: IdempotencyStore['get'] = (identity) => this.call('get', identity, undefined, () => this.inner.get(identity));
  settle: IdempotencyStore['settle'] = (identity, ownerToken, settlement, now, writes) =>
    this.call(
      'settle',
      identity,
      settlement.status === 'SUCCEEDED' ? 'complete' : 'fail',
      () => this.inner.settle(identity, ownerToken, settlement, now, writes),
      writes,
    );
  reviewLog: ReviewStore['reviewLog'] = (identity) => this.call('reviewLog', identity, undefined, () => this.inner.reviewLog(identity));
  decide: ReviewStore['decide'] = (record, log, decision, entry, now) =>
    this.call('decide', record, decision.event, () => this.inner.decide(record, log, decision, entry, now));
  release: IdempotencyStore['release'] = (identity, ownerToken) =>
    this.call('release', identity, 'release', () => this.inner.release(identity, ownerToken));
  markUnknown: IdempotencyStore['markUnknown'] = (identity, ownerToken, details, now) =>
    this.call('markUnknown', identity, 'uncertain', () => this.inner.markUnknown(identity, ownerToken, details, now));
  expireLease: IdempotencyStore['expireLease'] = (record, now, inFlightUntil) =>
    this.call('expireLease', record, 'lease_expired', () => this.inner.expireLease(record, now, inFlightUntil));
  reconcile: IdempotencyStore['reconcile'] = (record, outcome, now) =>
    this.call('reconcile', record, outcome.event, () => this.inner.reconcile(record, outcome, now));
  deferReconcile: IdempotencyStore['deferReconcile'] = (record, nextCheckAt, reason, now, options) =>
    this.call('deferReconcile', record, 'reconcile_deferred', () => this.inner.deferReconcile(record, nextCheckAt, reason, now, options));
  takeOver: IdempotencyStore['takeOver'] = (identity, expected, next, lease, now) =>
    this.call('takeOver', identity, 'take_over', () => this.inner.takeOver(identity, expected, next, lease, now));
}

// ---------------------------------------------------------------------------------------------------------------------
// Variants: the real code, or a planted bug
// ---------------------------------------------------------------------------------------------------------------------

/** What a run is made of; the planted bugs replace one part. */
export interface Variant {
  name: string;
  /** The store every actor writes through (a planted bug wraps the real one). `liveArgs` are the caller's own. */
  wrapStore?: (
    store: IdempotencyStore & ReviewStore,
    context: { liveArgs?: Record<string, unknown>; clock: Clock },
  ) => IdempotencyStore & ReviewStore;
  /** One reconciler pass over the run's key. */
  reconcilePass?: (pass: ReconcilerPass, record: IdempotencyRecord | undefined, now: number) => Promise<void>;
  /** The client's retry of an `unknown` answer: the same key (the contract) or a new one (a planted bug). */
  retryUnknownWithNewKey?: boolean;
  /** The downstream declared to dedup does not (planted bug "a consumer without dedup"). */
  dedupLies?: boolean;
  /** What the caller's code does with the engine's answer before returning it, through the caller's store. */
  afterRun?: (answer: WriteToolResult<unknown>, store: IdempotencyStore, identity: RecordIdentity) => Promise<void>;
  /** The in-memory store of the run (a planted bug may need to reach into it). */
  makeStore?: () => InMemoryIdempotencyStore;
}

export const REAL: Variant = { name: 'the real code' };

/** The real Reconciler's per-record step over one key (its `runOnce` finds records through DynamoDB's index). */
export class ReconcilerPass extends Reconciler {
  settle(record: IdempotencyRecord, now: number) {
    return this.settleUnknown(record, now);
  }

  expire(record: IdempotencyRecord, now: number) {
    return this.expireLease(record, now);
  }
}

/** What `Reconciler.runOnce` does to one record: settle a due UNKNOWN (its rule), or mark a PROCESSING whose lease (+ grace) passed. */
export async function realReconcilePass(pass: ReconcilerPass, record: IdempotencyRecord | undefined, now: number) {
  if (record?.status === 'UNKNOWN' && pass.isDue(record, now)) await pass.settle(record, now);
  else if (record?.status === 'PROCESSING' && leaseHasPassed(record.leaseExpiresAt + TIMES.leaseGraceMs, now))
    await pass.expire(record, now);
}

// ---------------------------------------------------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------------------------------------------------
