import { Logger } from '@aws-lambda-powertools/logger';
import fc from 'fast-check';
import { vi } from 'vitest';
import type { Clock } from '../../../lambdas/core/clock';
import { ErrorCode, StoreUnavailableError, TerminalToolError, TransientToolError, UncertainToolError } from '../../../lambdas/core/errors';
import { absenceIsConclusive, decidableAt } from '../../../lambdas/core/in-flight';
import { leaseHasPassed } from '../../../lambdas/core/lease';
import type { WriteToolResult } from '../../../lambdas/core/result-contract';
import type { ItemKey } from '../../../lambdas/core/keys';
import {
  isSettled,
  keyIsFree,
  transition,
  type IdempotencyRecord,
  type RecordState,
  type TransitionEvent,
} from '../../../lambdas/core/state-machine';
import { type IdempotencyPolicy, toolInFlightWindowMs } from '../../../lambdas/core/tool-policy';
import { IdempotencyEngine } from '../../../lambdas/engine/engine';
import type { ExecutionContext } from '../../../lambdas/engine/write-request';
import { InMemoryIdempotencyStore } from '../../../lambdas/engine/in-memory-store';
import type {
  ExtraWrite,
  IdempotencyStore,
  OperatorDecision,
  RecordIdentity,
  RecordQueries,
  ReviewStore,
} from '../../../lambdas/engine/persistence';
import { Reconciler, type ToolReconciler } from '../../../lambdas/reconciler/reconciler';

/**
 * The race exploration of the real engine (issue 23 item 5). fast-check's scheduler decides the order in which every
 * await of every actor resumes: each store call and each downstream call of each caller, each reconciler pass, each
 * step of time. The engine, the store and the reconciler are the project's own; only the world around them is made
 * up here: a downstream with a ledger of effects, callers that crash or meet faults at a chosen await, a clock.
 */

export const TENANT = 'tenant-races';
export const TOOL = 'pay';

/** Times small enough that a lease passes within a run: lease = budget + margin. */
export const TIMES = {
  executionTimeoutMs: 1_000,
  completionMarginMs: 500,
  inProgressWaitMs: 600,
  leaseGraceMs: 500,
  backoffBaseMs: 1_000,
  maxAttempts: 3,
  /** With the execution timeout, the tool's in-flight window (1.5 s): it passes within the settling passes. */
  downstreamTimeoutMs: 500,
} as const;

// ---------------------------------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------------------------------

/** What the caller's downstream call does. */
export type DownstreamFault =
  | 'none'
  /** Refused before acting (503 before commit): TransientToolError, no effect. */
  | 'transient'
  /** A business rejection: TerminalToolError, no effect. */
  | 'terminal'
  /** Acted, then the answer was lost: UncertainToolError after the effect. */
  | 'commit_then_timeout'
  /** The request never lands and never answers: only the engine's deadline ends the call (in-memory run only). */
  | 'hang_before'
  /** The request lands, its answer never comes: the deadline ends the call (in-memory run only). */
  | 'hang_after'
  /**
   * Requests on the wire (issue 48 item 7): the executor works until just before its deadline, sends, and its client
   * gives up on the answer (UncertainToolError); the request lands later, at the last moment of its in-flight window
   * (its send plus the window: time passes to it when the scheduler lets the landing go), never after it.
   */
  | 'lands_late'
  /** Sent at once; the client gives up; it lands just after the call's deadline (inside its window). */
  | 'lands_after_deadline'
  /** Sent at once; lands at its window's end or later: a dedup downstream only (a repeat of the key is the same effect). */
  | 'lands_after_window';

/** The faults that leave a request on the wire (`ScenarioOptions.lateLandings`). */
const ON_THE_WIRE: DownstreamFault[] = ['lands_late', 'lands_after_deadline', 'lands_after_window'];

/** A fault at the n-th await of one actor (store call or downstream step). */
export interface Fault {
  at: number;
  /**
   * crash_before: the process dies before the step takes effect; crash_after: it takes effect, then the process dies
   * (a write applied whose answer never came back). store_error_before / _after: the store call throws
   * StoreUnavailableError, without or with the write applied (the caller goes on; only for store calls).
   */
  mode: 'crash_before' | 'crash_after' | 'store_error_before' | 'store_error_after';
}

export interface CallerPlan {
  /** Arguments: callers with the same intent send the same arguments; another intent under the same key conflicts. */
  intent: 'A' | 'B';
  downstream: DownstreamFault;
  fault?: Fault;
  /** The handler changes its input after the claim (normalises a field): the engine must not care. */
  mutatesInput: boolean;
  /** Which of the run's keys the caller sends: callers on different keys are different operations. */
  key: number;
  /** A client that calls again at once (same key, as told) when its answer invites a retry, within the race. */
  retriesAtOnce: boolean;
  /** A duplicate that arrives late: after the driver's time steps, while operators may still be at work. */
  late: boolean;
}

export type DriverStep = { kind: 'advance'; ms: number } | { kind: 'reconcile' };

export interface Scenario {
  /** A downstream that dedups by our key (tool declares reexecuteSafe), or one that acts on every request. */
  downstream: 'dedup' | 'plain';
  /** The tool has a reconcile hook that asks the downstream by our key. */
  hook: boolean;
  /** What the reconciler does when the downstream confirms absence. */
  onAbsent: 'release' | 'fail';
  reexecuteSafe: boolean;
  callers: CallerPlan[];
  driver: DriverStep[];
  /** How many keys the callers use (1-3); each key its own record, effects and answers. */
  keys: number;
  /**
   * 'local': the tool's effect is an item committed with its record (the one-request path: record and items in one
   * transaction); 'external': a downstream call between the claim and the settlement.
   */
  effect: 'local' | 'external';
  /** A retention short enough to pass within the run (the key frees by time), or none (24 h, the default). */
  retention?: { seconds: number; onExpired: 'execute' | 'review' };
  /** Operator passes running beside the callers: each settles UNKNOWN / NEEDS_REVIEW records it checked by hand. */
  operators: number;
}

export interface ScenarioOptions {
  /** Include faults that only the engine's deadline timer ends (needs fake timers: in-memory run). */
  hangs: boolean;
  maxCallers: number;
  maxDriverSteps: number;
  /** Restrict the downstream kind (planted bugs aim at the one that shows them). */
  downstream?: Scenario['downstream'];
  /** Force reexecuteSafe (a planted bug where the tool claims a dedup its consumer lacks). */
  reexecuteSafe?: boolean;
  /** Restrict the downstream faults a caller may meet (a planted bug's search aims at the ones that show it). */
  faults?: DownstreamFault[];
  /** Up to this many keys per run (default 1). */
  maxKeys?: number;
  /** Tools whose effect is local (the one-request path): never, sometimes, or always. Default never. */
  local?: 'sometimes' | 'always';
  /** Sometimes (or always) a retention that passes within the run. Default never. */
  retention?: 'sometimes' | 'always';
  /** Up to this many operator passes beside the callers. Default 0. */
  maxOperators?: number;
  /** Clients that call again at once within the race, and callers that arrive late. Default false. */
  retriesAtOnce?: boolean;
  /** Downstream requests that land after their caller gave up (`lands_*` faults). Default false. */
  lateLandings?: boolean;
}

/**
 * What the exploration covers: up to three callers on up to three keys, the one-request path (local tools) in a
 * third of the runs, a retention that passes within the run in a third, up to two operators settling by hand, and
 * clients that call again at once.
 */
export const EXPLORED: ScenarioOptions = {
  hangs: true,
  maxCallers: 3,
  maxDriverSteps: 6,
  maxKeys: 3,
  local: 'sometimes',
  retention: 'sometimes',
  maxOperators: 2,
  retriesAtOnce: true,
};

/**
 * The same with requests on the wire (issue 48 item 7): some downstream requests land after their caller gave up,
 * inside their in-flight window (at its last moment, or just after the call's deadline) and, for a dedup downstream,
 * after it. Its own test and seeds, so the kept regressions of `EXPLORED` replay the runs they were found in.
 */
export const LATE_LANDINGS: ScenarioOptions = { ...EXPLORED, lateLandings: true };

export function scenarioArbitrary(options: ScenarioOptions): fc.Arbitrary<Scenario> {
  const faults: DownstreamFault[] = options.faults ?? ['none', 'transient', 'terminal', 'commit_then_timeout'];
  if (options.lateLandings && !options.faults) faults.push(...ON_THE_WIRE, ...ON_THE_WIRE);
  if (options.hangs && !options.faults) faults.push('hang_before', 'hang_after');
  const caller = fc.record({
    intent: fc.constantFrom<'A' | 'B'>('A', 'A', 'B'),
    downstream: fc.oneof(
      { weight: 3, arbitrary: fc.constant<DownstreamFault>('none') },
      { weight: 2, arbitrary: fc.constantFrom(...faults) },
    ),
    fault: fc.option(
      fc.record({
        at: fc.nat({ max: 6 }),
        mode: fc.constantFrom<Fault['mode']>('crash_before', 'crash_after', 'store_error_before', 'store_error_after'),
      }),
      { nil: undefined, freq: 2 },
    ),
    mutatesInput: fc.boolean(),
    key: fc.nat({ max: (options.maxKeys ?? 1) - 1 }),
    retriesAtOnce: options.retriesAtOnce ? fc.boolean() : fc.constant(false),
    late: options.retriesAtOnce ? fc.boolean() : fc.constant(false),
  });
  const step = fc.oneof(
    fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(100, 400, 1_000, 2_000) }),
    fc.record({ kind: fc.constant('reconcile' as const) }),
  );
  return fc
    .record({
      downstream: options.downstream ? fc.constant(options.downstream) : fc.constantFrom<Scenario['downstream']>('dedup', 'plain'),
      hook: fc.boolean(),
      onAbsent: fc.constantFrom<Scenario['onAbsent']>('release', 'fail'),
      reexecuteSafe: fc.boolean(),
      callers: fc.array(caller, { minLength: 2, maxLength: options.maxCallers }),
      driver: fc.array(step, { minLength: 1, maxLength: options.maxDriverSteps }),
      keys: fc.integer({ min: 1, max: options.maxKeys ?? 1 }),
      effect: sometimes(options.local, 'local' as const, 'external' as const),
      retention: sometimes(
        options.retention,
        fc.record({ seconds: fc.constantFrom(2, 3), onExpired: fc.constantFrom<'execute' | 'review'>('execute', 'execute', 'review') }),
        undefined,
      ),
      operators: fc.nat({ max: options.maxOperators ?? 0 }),
    })
    .map((s) => ({
      ...s,
      // Keys are spread over the run's key count; a local tool calls no downstream, so no downstream-only fault.
      callers: s.callers.map((c) => ({
        ...c,
        key: c.key % s.keys,
        downstream:
          s.effect === 'local' &&
          (c.downstream === 'commit_then_timeout' || c.downstream === 'hang_after' || ON_THE_WIRE.includes(c.downstream))
            ? 'none'
            : c.downstream,
      })),
      // The engine's promise: re-running a stale execution is only declared safe for a downstream that dedups.
      reexecuteSafe: options.reexecuteSafe ?? (s.downstream === 'dedup' && s.reexecuteSafe),
    }));
}

/** `when`: the `on` value sometimes (one run in three) or always; the `off` value otherwise. */
function sometimes<T>(when: 'sometimes' | 'always' | undefined, on: T | fc.Arbitrary<T>, off: T): fc.Arbitrary<T> {
  const onArb = on instanceof fc.Arbitrary ? on : fc.constant(on);
  if (when === 'always') return onArb;
  if (when === 'sometimes') return fc.oneof({ weight: 2, arbitrary: fc.constant(off) }, { weight: 1, arbitrary: onArb });
  return fc.constant(off);
}

// ---------------------------------------------------------------------------------------------------------------------
// The world: clock, downstream, actors
// ---------------------------------------------------------------------------------------------------------------------

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
const stable = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  ) ?? 'undefined';

const silentLogger = new Logger({ logLevel: 'SILENT' });
const never = <T>() => new Promise<T>(() => {});

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

export interface Answer {
  caller: string;
  intent: string;
  key: string;
  phase: 'race' | 'retry' | 'after_expiry';
  answer: WriteToolResult<unknown>;
  /** Effects with this answer's key, in the key's epoch, in the ledger when the answer was given. */
  effectsAtAnswer: Effect[];
  recordAtAnswer: IdempotencyRecord | undefined;
  /** The clock when the call started, and the key's epoch when it answered. */
  startedAt: number;
  epoch: number;
}

export interface WorldOptions {
  scheduler: fc.Scheduler;
  scenario: Scenario;
  variant: Variant;
  /** The run's first key; the others are made from it (`<key>-1`, `<key>-2`). */
  key: string;
  store: IdempotencyStore & ReviewStore & RecordQueries;
  clock: WorldClock;
  /** A fresh key for the planted client that retries `unknown` with a new key. */
  newKey: () => string;
  /** Reads a record's state outside any actor (for observations and answers). */
  peek: (identity: RecordIdentity) => Promise<IdempotencyRecord | undefined>;
  /** Reads a tool's item outside any actor (what a local tool committed). */
  peekItem: (key: ItemKey) => Promise<Record<string, unknown> | undefined>;
  /** DynamoDB: the reconciler's `runOnce` finds the records through the store's queries. Without it, `realReconcilePass` over the keys. */
  index?: boolean;
  /** How long nothing pending while an actor runs means it is stuck (real I/O takes longer than memory). */
  stuckAfterMs?: number;
}

/** A Lambda instance: its engine, and the call it serves now. */
interface Instance {
  engine: IdempotencyEngine;
  current: { actor: Actor; store: ActorStore };
}

export class World {
  readonly scheduler: fc.Scheduler;
  readonly downstream: Downstream;
  readonly answers: Answer[] = [];
  readonly observations: Observation[] = [];
  readonly violations: string[] = [];
  readonly actors: Actor[] = [];
  /** The run's keys: callers on different keys are different operations. */
  readonly keys: string[];
  /** Per key: its retention epoch (a claim over an expired record starts the next one). */
  private readonly epochs = new Map<string, number>();
  /** Per key and epoch: the retention of the settled record, as last written. */
  readonly retainedUntil = new Map<string, number>();
  private lock: Promise<unknown> = Promise.resolve();
  private localItems = 0;
  /** Requests on the wire that landed after their caller's deadline, and after their window (a dedup downstream). */
  readonly landings = { afterDeadline: 0, afterWindow: 0 };

  constructor(readonly options: WorldOptions) {
    this.scheduler = options.scheduler;
    this.keys = Array.from({ length: options.scenario.keys }, (_, i) => (i === 0 ? options.key : `${options.key}-${i}`));
    this.downstream = new Downstream(options.scenario.downstream === 'dedup' && !options.variant.dedupLies, (key) => this.epochOf(key));
  }

  epochOf(key: string): number {
    return this.epochs.get(key) ?? 0;
  }

  /**
   * One store call at a time, with the reads that observe it: a write and the reads around it never interleave with
   * another write (DynamoDB's calls are real I/O). The scheduler still decides which call goes next.
   */
  locked<T>(apply: () => Promise<T>): Promise<T> {
    const run = this.lock.then(apply, apply);
    this.lock = run.catch(() => {});
    return run;
  }

  /** Until every store call in flight has returned and every continuation has run to its next await. */
  private async quiet() {
    for (;;) {
      const lock = this.lock;
      await lock;
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (lock === this.lock) return;
    }
  }

  /**
   * Lets the scheduler release one pending await at a time, the world quiet between two, until `target` is done and
   * nothing is pending. Quiet steps make the choice points the same on every replay of a seed.
   */
  async runUntil(target: Promise<unknown>, what: string) {
    let finished = false;
    let failure: unknown;
    target.then(
      () => (finished = true),
      (err: unknown) => {
        finished = true;
        failure = err;
      },
    );
    const started = Date.now();
    for (;;) {
      await this.quiet();
      if (this.scheduler.count() > 0) {
        await this.scheduler.waitOne();
        continue;
      }
      if (finished) break;
      // Nothing pending yet the target runs: real I/O (DynamoDB's index queries), or a stuck actor.
      if (Date.now() - started > (this.options.stuckAfterMs ?? 2_000))
        throw new InvariantViolation(`${what} never finished, with nothing left to schedule`);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (failure) throw failure;
  }

  /**
   * Applies one store call and records the transition it made; checks it against the code's table right away. The
   * items of a local tool's writes that exist afterwards are its effects (they commit with the record or not at all).
   */
  async observe<T>(
    method: string,
    identity: RecordIdentity,
    event: TransitionEvent | undefined,
    apply: () => Promise<T>,
    writes?: ExtraWrite[],
  ): Promise<T> {
    const watched = identity.tenant === TENANT && identity.tool === TOOL && this.keys.includes(identity.idempotencyKey);
    const before = watched ? await this.options.peek(identity) : undefined;
    try {
      return await apply();
    } finally {
      if (watched) this.check(method, event, identity.idempotencyKey, before, await this.options.peek(identity));
      for (const { create } of writes ?? []) {
        const item = await this.options.peekItem(create.key);
        if (item) this.downstream.committed(identity.idempotencyKey, String(item.intent), String(item.effect));
      }
    }
  }

  private check(
    method: string,
    event: TransitionEvent | undefined,
    key: string,
    before: IdempotencyRecord | undefined,
    after: IdempotencyRecord | undefined,
  ) {
    const from: RecordState = before?.status ?? 'ABSENT';
    const to: RecordState = after?.status ?? 'ABSENT';
    const changed = stable(before) !== stable(after);
    const ownerChanged = before?.ownerToken !== after?.ownerToken;
    this.observations.push({ method, event, before: from, after: to, ownerChanged });
    if (!changed) return;
    if (method === 'get' || method === 'reviewLog') return this.violation(`a read changed the record: ${from} -> ${to}`);
    // A claim over a key freed by time is `expire` then `claim`; commitOnce is `claim` then `complete|fail`, over a
    // free key (absent or expired).
    const allowed = (f: RecordState, e: TransitionEvent) => {
      try {
        return transition(f, e) === to;
      } catch {
        return false;
      }
    };
    const settledAtOnce = (f: RecordState) => isSettled(to) && (f === 'ABSENT' || isExpiredThenClaimed(f, 'PROCESSING'));
    const legal = event
      ? allowed(from, event) || (event === 'claim' && isExpiredThenClaimed(from, to))
      : method === 'commitOnce' && settledAtOnce(from);
    if (!legal)
      this.violation(`store.${method} moved the record ${from} -> ${to}${event ? ` as '${event}'` : ''}: not in the transition table`);
    // `expire` has a guard the table does not show: the record's retention passed (under the tool's policy).
    if (before && isSettled(before.status) && (method === 'claim' || method === 'commitOnce')) {
      if (!keyIsFree(before, this.options.clock.clock(), this.options.scenario.retention?.onExpired ?? 'execute')) {
        this.violation(`store.${method} took a ${from} record still within its retention as expired`);
      }
      this.epochs.set(key, this.epochOf(key) + 1);
    }
    if (after && isSettled(after.status)) this.retainedUntil.set(`${key}#${this.epochOf(key)}`, after.retainUntil);
    // A reconciler's lookup inside the in-flight window decides nothing (lambdas/core/in-flight.ts): it is not counted as
    // an attempt and parks nothing for a person, whatever it answered (absent, unreachable, no hook).
    if (before?.status === 'UNKNOWN' && (method === 'deferReconcile' || method === 'reconcile')) {
      const window = toolInFlightWindowMs(this.policy(), TIMES.downstreamTimeoutMs, this.options.scenario.effect);
      if (this.options.clock.clock() < decidableAt(before, window)) {
        if ((after?.reconcileAttempts ?? 0) > (before.reconcileAttempts ?? 0))
          this.violation(`${key}: a lookup inside the in-flight window counted as an attempt`);
        if (event === 'reconcile_exhausted') this.violation(`${key}: parked for a person inside the in-flight window`);
      }
    }
  }

  violation(message: string) {
    this.violations.push(message);
  }

  /** A caller: its own engine (a Lambda instance), its own store view and downstream view, faults as planned. */
  startCaller(
    name: string,
    plan: CallerPlan,
    key: string,
    phase: Answer['phase'],
    fault: Fault | undefined,
    instance?: Instance,
  ): Promise<void> {
    const actor = new Actor(name, this, fault);
    this.actors.push(actor);
    const startedAt = this.options.clock.clock();
    const operation = `${plan.key}${plan.intent}`;
    const args: Record<string, unknown> = { intent: plan.intent, amount: plan.intent === 'A' ? 100 : 200, note: 'as sent' };
    const store = this.storeFor(actor, args);
    // The engine lives as long as its Lambda instance: a call sent again to the same instance meets the same engine
    // (what it remembers included), through this call's actor.
    const current = instance?.current ?? { actor, store };
    current.actor = actor;
    current.store = store;
    const engine =
      instance?.engine ??
      new IdempotencyEngine({
        store: new Proxy(store, {
          get: (_, method: string) => {
            const value = (current.store as unknown as Record<string, unknown>)[method];
            return typeof value === 'function' ? value.bind(current.store) : value;
          },
        }),
        clock: this.options.clock.clock,
        inProgressWaitMs: TIMES.inProgressWaitMs,
        completionMarginMs: TIMES.completionMarginMs,
        downstreamTimeoutMs: TIMES.downstreamTimeoutMs,
        sleep: (ms) =>
          current.actor.step(
            `sleep ${ms}`,
            async () => {
              this.options.clock.advance(ms);
            },
            false,
          ),
      });
    const policy = this.policy();
    const local = this.options.scenario.effect === 'local';
    /** A local tool: computes its result and the item it writes; nothing outside. The item commits with the record. */
    const executeLocally = async (ctx: ExecutionContext) => {
      if (plan.mutatesInput) args.note = 'normalised by the handler';
      await actor.step(`compute (${ctx.path})`, async () => {}, false);
      if (plan.downstream === 'transient') throw new TransientToolError('BUSY', 'a transient failure before any write');
      if (plan.downstream === 'terminal') throw new TerminalToolError('DECLINED', 'a business rule refused it');
      if (plan.downstream === 'hang_before') return never<never>();
      const id = `item-${++this.localItems}`;
      return {
        result: { effect: id, intent: operation },
        writes: [{ create: { key: { pk: `EFFECT#${ctx.idempotencyKey}`, sk: id }, item: { intent: operation, effect: id } } }],
      };
    };
    const execute = async (ctx: ExecutionContext) => {
      if (plan.mutatesInput) args.note = 'normalised by the handler';
      const fault = plan.downstream;
      await actor.step('downstream request', async () => {}, false);
      if (fault === 'transient') throw new TransientToolError('DOWNSTREAM_BUSY', 'the downstream refused before acting');
      // A downstream that dedups answers a key it already acted on with that effect, before any business rule.
      const acted = this.downstream.dedup && this.downstream.lookup(ctx.idempotencyKey) !== undefined;
      if (fault === 'terminal' && !acted) throw new TerminalToolError('DECLINED', 'the downstream declined');
      if (fault === 'hang_before') return never<never>();
      if (ON_THE_WIRE.includes(fault)) {
        // The executor works until just before its deadline (time passes), then sends: from here the request is on
        // the wire whatever becomes of its caller (a crash after this step included).
        if (fault === 'lands_late') {
          await actor.step(
            'works',
            async () => this.options.clock.advance(Math.max(0, ctx.deadline - 1 - this.options.clock.clock())),
            false,
          );
        }
        await actor.step(
          'sends',
          async () => {
            // The window bounds how long after its send a request can land (lambdas/core/in-flight.ts).
            const sentAt = this.options.clock.clock();
            const until = sentAt + toolInFlightWindowMs(policy, TIMES.downstreamTimeoutMs, 'external');
            const at = fault === 'lands_late' ? until - 1 : fault === 'lands_after_deadline' ? ctx.deadline + 1 : until;
            // An executor sends nothing after its deadline (the engine aborts its signal): every send is before the lease's end.
            if (ctx.signal.aborted || sentAt >= ctx.deadline) return;
            if (fault !== 'lands_after_window' || this.downstream.dedup)
              void this.onTheWire(ctx.idempotencyKey, operation, ctx.deadline, until, at);
          },
          false,
        );
        throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'our client gave up on the request; it is still on the wire');
      }
      // The downstream honours the call's deadline (the engine hands it the signal): nothing lands after it. This is
      // the assumption the promise for a downstream without dedup rests on (docs/correctness.md).
      const effect = await actor.step(
        'downstream lands',
        async () =>
          ctx.signal.aborted || this.options.clock.clock() >= ctx.deadline ? undefined : this.downstream.act(ctx.idempotencyKey, operation),
        false,
      );
      if (!effect) throw new UncertainToolError('ABORTED', 'the call was aborted at its deadline');
      if (fault === 'hang_after') return never<never>();
      await actor.step('downstream answers', async () => {}, false);
      if (fault === 'commit_then_timeout') throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'the downstream did not answer in time');
      return { result: { effect: effect.id, intent: effect.intent } };
    };
    const identity = { tenant: TENANT, tool: TOOL, idempotencyKey: key };
    return new Promise<void>((resolve) => {
      engine
        .run({ ...identity, args: { ...args }, effect: local ? 'local' : 'external' }, policy, (ctx) =>
          local ? executeLocally(ctx) : execute(ctx),
        )
        .then(
          async (answer) => {
            await this.options.variant.afterRun?.(answer, store, identity);
            const recordAtAnswer = await this.options.peek(identity);
            const epoch = this.epochOf(key);
            const effectsAtAnswer = this.downstream.ledger.filter((e) => e.key === key && e.epoch === epoch);
            this.answers.push({ caller: name, intent: operation, key, phase, answer, effectsAtAnswer, recordAtAnswer, startedAt, epoch });
            // A client that sends the call again at once (told to retry, or a duplicate), with the same key, to the
            // same instance: within the race, not after it. Its downstream behaves as it did for the first call.
            if (phase === 'race' && plan.retriesAtOnce) {
              await this.startCaller(`${name}.again`, { ...plan, retriesAtOnce: false }, key, 'race', undefined, { engine, current });
            }
          },
          (err: unknown) => this.violation(`${name} threw instead of answering: ${String(err)}`),
        )
        .finally(resolve);
    });
  }

  /**
   * A request on the wire (issue 48 item 7): it lands when the scheduler lets it (after a step of its own, so other
   * actors and time may move first), at `at` (time passes to it) or now if that is later; never at or after `until`,
   * its window's end, unless `at` is there already (a dedup downstream: a repeat of the key is the same effect).
   */
  private async onTheWire(key: string, operation: string, deadline: number, until: number, at: number) {
    const wire = new Actor(`wire:${key}`, this, undefined);
    this.actors.push(wire);
    await wire.step('on the wire', async () => {}, false);
    await wire.step(
      'lands',
      async () => {
        const { clock } = this.options;
        if (clock.clock() < at) clock.advance(at - clock.clock());
        const now = clock.clock();
        if (now >= until && at < until) return;
        this.downstream.act(key, operation);
        if (now >= deadline) this.landings.afterDeadline++;
        if (now >= until) this.landings.afterWindow++;
      },
      false,
    );
  }

  private storeFor(actor: Actor, liveArgs?: Record<string, unknown>): ActorStore {
    const base = this.options.variant.wrapStore
      ? this.options.variant.wrapStore(this.options.store, { liveArgs, clock: this.options.clock.clock })
      : this.options.store;
    return new ActorStore(actor, this, base, this.options.store);
  }

  /** The tool's settings in this run. */
  policy(): IdempotencyPolicy {
    const { retention } = this.options.scenario;
    return {
      reexecuteSafe: this.options.scenario.reexecuteSafe,
      executionTimeoutMs: TIMES.executionTimeoutMs,
      ...(retention ? { retentionSeconds: retention.seconds, onExpired: retention.onExpired } : {}),
    };
  }

  reconcilerPass(actor: Actor): ReconcilerPass {
    const store = this.storeFor(actor);
    const tools = new Map<string, ToolReconciler>([
      [
        TOOL,
        {
          onAbsent: this.options.scenario.onAbsent,
          inFlightWindowMs: toolInFlightWindowMs(this.policy(), TIMES.downstreamTimeoutMs, this.options.scenario.effect),
          reconcile: this.options.scenario.hook
            ? async ({ record }) => {
                const effect = await actor.step('ask downstream by key', async () => this.downstream.lookup(record.idempotencyKey), false);
                return effect ? { kind: 'found', result: { effect: effect.id, intent: effect.intent } } : { kind: 'absent' };
              }
            : undefined,
        },
      ],
    ]);
    return new ReconcilerPass({
      store,
      tools,
      logger: silentLogger,
      clock: this.options.clock.clock,
      leaseGraceMs: TIMES.leaseGraceMs,
      backoffBaseMs: TIMES.backoffBaseMs,
      maxAttempts: TIMES.maxAttempts,
    });
  }

  async reconcileOnce(name: string) {
    const actor = new Actor(name, this, undefined);
    const pass = this.reconcilerPass(actor);
    const store = this.storeFor(actor);
    if (this.options.index) {
      await pass.runOnce();
      return;
    }
    for (const key of this.keys) {
      const record = await store.get({ tenant: TENANT, tool: TOOL, idempotencyKey: key });
      const now = this.options.clock.clock();
      if (this.options.variant.reconcilePass) await this.options.variant.reconcilePass(pass, record, now);
      else await realReconcilePass(pass, record, now);
    }
  }

  /**
   * A person working the review queue beside everything else: reads each key's record and its review log, checks the
   * downstream by hand (found, with its result; or absent), and writes the decision the tool's absence policy calls
   * for, fenced on what was read (the store's `decide`, as `ops` does). Each read, the check and the write is an
   * await the scheduler places; a decision the record moved away from is refused, and the person looks again.
   */
  async operate(name: string, looks: number) {
    const actor = new Actor(name, this, undefined);
    this.actors.push(actor);
    const store = this.storeFor(actor);
    for (let look = 0; look < looks; look++) {
      await actor.step('looks at the queue', async () => {}, false);
      for (const key of this.keys) {
        const identity = { tenant: TENANT, tool: TOOL, idempotencyKey: key };
        const record = await store.get(identity);
        if (record?.status !== 'UNKNOWN' && record?.status !== 'NEEDS_REVIEW') continue;
        const log = await store.reviewLog(identity);
        const effect = await actor.step('checks the downstream by hand', async () => this.downstream.lookup(key), false);
        // As `npm run ops -- settle --absent` (lambdas/ops/review.ts): nothing found inside the window proves nothing yet, in
        // the runs where a request can land late. Elsewhere nothing lands after its deadline and the person decides at
        // once, as before (the planted unfenced settle needs those early decisions to be found).
        const window = toolInFlightWindowMs(this.policy(), TIMES.downstreamTimeoutMs, this.options.scenario.effect);
        const onTheWire = this.options.scenario.callers.some((c) => ON_THE_WIRE.includes(c.downstream));
        if (!effect && onTheWire && !absenceIsConclusive(decidableAt(record, window), this.options.clock.clock())) continue;
        const decision: OperatorDecision = effect
          ? { event: 'operator_settled_found', result: { effect: effect.id, intent: effect.intent } }
          : this.options.scenario.onAbsent === 'fail'
            ? {
                event: 'operator_settled_absent_fail',
                error: { code: ErrorCode.NOT_EXECUTED, message: 'a person confirmed it did not happen' },
              }
            : { event: 'operator_settled_absent' };
        const now = this.options.clock.clock();
        const entry = {
          by: name,
          at: now,
          action: decision.event,
          reason: 'checked by hand',
          from: record.status,
          to: transition(record.status, decision.event),
        };
        await store.decide(record, log, decision, entry, now);
      }
    }
  }

  /** The driver: time steps and reconciler passes, each one an await the scheduler places among the callers'. */
  async drive(steps: DriverStep[]) {
    for (const [i, step] of steps.entries()) {
      await this.scheduler.schedule(Promise.resolve(), `driver:${step.kind === 'advance' ? `advance ${step.ms}` : 'reconcile'}`);
      if (step.kind === 'advance') await this.locked(async () => this.options.clock.advance(step.ms));
      else await this.reconcileOnce(`reconciler#${i}`);
    }
  }
}

function isExpiredThenClaimed(from: RecordState, to: RecordState) {
  try {
    return transition(transition(from, 'expire'), 'claim') === to;
  } catch {
    return false;
  }
}

/**
 * One run: the callers race under the driver and the operators; then the world settles (time passes every lease,
 * the reconciler runs until nothing is due), every caller whose answer invites a retry (or whose process died)
 * retries once, and the world settles again. With a short retention, each key is then called once more after its
 * retention ended: a new operation. Returns the world for the invariants.
 */
export async function runScenario(options: WorldOptions): Promise<World> {
  const world = new World(options);
  const { scenario } = options;
  // Not awaited: a caller that crashed never answers, one that hangs answers when time reaches its deadline.
  const start = (i: number, plan: CallerPlan) => world.startCaller(`caller${i}`, plan, world.keys[plan.key]!, 'race', plan.fault);
  for (const [i, plan] of scenario.callers.entries()) if (!plan.late) void start(i, plan);
  for (let i = 0; i < scenario.operators; i++) void world.operate(`operator${i}`, 2);
  await world.runUntil(world.drive(scenario.driver), 'the driver');
  // Not awaited either: until nothing is left to schedule (a late caller may crash too).
  for (const [i, plan] of scenario.callers.entries()) if (plan.late) void start(i, plan);
  await world.runUntil(Promise.resolve(), 'the late callers');
  await settleWorld(world);
  // Clients: a call that died or that was told to retry is sent again, with the same key (or, planted, a new one).
  const retries: Promise<void>[] = [];
  for (const [i, plan] of scenario.callers.entries()) {
    const name = `caller${i}`;
    const answers = world.answers.filter((a) => (a.caller === name || a.caller === `${name}.again`) && a.phase === 'race');
    const answer = answers.at(-1);
    if (answer && !answer.answer.retryable) continue;
    const newKey = options.variant.retryUnknownWithNewKey && answer?.answer.outcome === 'unknown';
    // The retry meets no fault of its own: it shows what the key now answers.
    retries.push(
      world.startCaller(
        `${name}.retry`,
        { ...plan, downstream: 'none', retriesAtOnce: false },
        newKey ? options.newKey() : world.keys[plan.key]!,
        'retry',
        undefined,
      ),
    );
  }
  await world.runUntil(Promise.all(retries), 'a retry');
  await settleWorld(world);
  if (scenario.retention) {
    // Past every retention: the same arguments again on each key are a new operation, never a replay.
    await world.locked(async () => options.clock.advance(scenario.retention!.seconds * 1000));
    const calls = world.keys.map((key, slot) => {
      const plan = scenario.callers.find((c) => c.key === slot) ?? { ...scenario.callers[0]!, key: slot };
      return world.startCaller(
        `after-expiry#${slot}`,
        { ...plan, downstream: 'none', retriesAtOnce: false },
        key,
        'after_expiry',
        undefined,
      );
    });
    await world.runUntil(Promise.all(calls), 'a call after expiry');
    await settleWorld(world);
  }
  return world;
}

/** Past every lease and grace; reconciler passes (with time for their backoff) until the records rest. */
async function settleWorld(world: World) {
  const { clock } = world.options;
  for (let pass = 0; pass < TIMES.maxAttempts + 3; pass++) {
    await world.locked(async () =>
      clock.advance(TIMES.executionTimeoutMs + TIMES.completionMarginMs + TIMES.leaseGraceMs + 2 ** pass * TIMES.backoffBaseMs),
    );
    await world.runUntil(world.reconcileOnce(`settle#${pass}`), 'a reconciler pass');
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------------------------------------------------

/** Every invariant of issue 23 item 2 that a run of the real engine can show; returns the broken ones, in words. */
export async function invariantViolations(world: World): Promise<string[]> {
  const broken = [...world.violations];
  const ledger = world.downstream.ledger;
  const effectOf = (answer: Answer) => ledger.find((e) => e.id === (answer.answer.result as { effect?: string } | undefined)?.effect);

  // 1. At most one effect per key and retention epoch, and per operation (a client's one intent, whatever key it was
  //    sent with) and epoch.
  const counts = new Map<string, Effect[]>();
  for (const e of ledger) {
    for (const group of [`key ${e.key}, epoch ${e.epoch}`, `operation ${e.intent}, epoch ${e.epoch}`])
      counts.set(group, [...(counts.get(group) ?? []), e]);
  }
  for (const [group, effects] of counts) {
    if (effects.length > 1) broken.push(`${effects.length} effects for one ${group}: ${effects.map((e) => e.id).join(', ')}`);
  }

  for (const key of world.keys) {
    // 2. Every succeeded answer for a key carries an effect of that key (never another key's) and of one epoch the
    //    same result; one answer per epoch says it executed, the others are replays, and no replay is given of a
    //    record whose retention had ended when the call began (after expiry a call is a new operation).
    const succeeded = world.answers.filter((a) => a.key === key && a.answer.outcome === 'succeeded');
    const executions = new Map<number, string[]>();
    for (const a of succeeded) {
      const effect = effectOf(a);
      if (!effect || effect.key !== key) {
        broken.push(`${a.caller} succeeded with ${JSON.stringify(a.answer.result)}, which no effect of its key carries`);
        continue;
      }
      if (!a.answer.replayed) executions.set(effect.epoch, [...(executions.get(effect.epoch) ?? []), a.caller]);
      const retainedUntil = world.retainedUntil.get(`${key}#${effect.epoch}`);
      if (a.answer.replayed && retainedUntil !== undefined && a.startedAt >= retainedUntil) {
        broken.push(`${a.caller} was answered as a duplicate of ${effect.id}, whose retention had ended before the call`);
      }
    }
    for (const [epoch, callers] of executions) {
      if (callers.length > 1)
        broken.push(`${callers.length} answers say they executed (not replayed) in epoch ${epoch}: ${callers.join(', ')}`);
    }

    // 5. Progress: after every lease passed and the reconciler ran, nothing is in progress or unknown; the record
    //    says what the downstream has (in the key's current epoch).
    const final = await world.options.peek({ tenant: TENANT, tool: TOOL, idempotencyKey: key });
    const current = ledger.filter((e) => e.key === key && e.epoch === world.epochOf(key));
    if (final && (final.status === 'PROCESSING' || final.status === 'UNKNOWN')) {
      broken.push(`${key}: the record stays ${final.status} after every lease passed and the reconciler ran`);
    }
    if (final?.status === 'SUCCEEDED' && !current.some((e) => e.id === (final.result as { effect?: string })?.effect)) {
      broken.push(`${key}: the record is SUCCEEDED with ${JSON.stringify(final.result)}, which no effect carries`);
    }
    if (final?.status === 'FAILED' && current.length > 0) broken.push(`${key}: the record is FAILED while ${current[0]!.id} exists`);
    if (!final && current.length > 0) broken.push(`${key}: the key is free while ${current[0]!.id} exists: a retry would run it again`);
  }

  // 3. No answer says nothing ran while an effect exists: a failure (retryable: "the key is free, call again"; or
  //    terminal: "declined"), or a conflict refusing the very arguments that took effect.
  for (const a of world.answers) {
    const { outcome, retryable, error } = a.answer;
    if (outcome === 'failed' && error?.code !== 'REVIEW_REQUIRED' && a.effectsAtAnswer.length > 0) {
      broken.push(
        `${a.caller} was told ${retryable ? 'to retry, nothing ran' : `it failed (${error?.code})`} while ${a.effectsAtAnswer[0]!.id} exists`,
      );
    }
    if (outcome === 'conflict' && a.effectsAtAnswer.some((e) => e.intent === a.intent)) {
      broken.push(`${a.caller} was refused as a conflict although its own arguments took effect`);
    }
  }
  return broken;
}

/** What a failing run prints besides fast-check's seed and path: each actor's awaits, in order. */
export function describeRun(world: World): string {
  const lines = world.actors.map((a) => `  ${a.name}${a.dead ? ' (crashed)' : ''}: ${a.trace.join(' > ')}`);
  const answers = world.answers.map(
    (a) =>
      `  ${a.caller} [${a.phase}] -> ${a.answer.outcome}${a.answer.replayed ? ' (replayed)' : ''} ${JSON.stringify(a.answer.result ?? a.answer.error?.code ?? '')}`,
  );
  const ledger = world.downstream.ledger.map((e) => `  ${e.id} key=${e.key} epoch=${e.epoch} operation=${e.intent}`);
  return ['actors:', ...lines, 'answers:', ...answers, 'ledger:', ...ledger].join('\n');
}

// ---------------------------------------------------------------------------------------------------------------------
// The in-memory exploration (CI) and its replay
// ---------------------------------------------------------------------------------------------------------------------

/** Epoch ms the runs start at (any fixed instant: runs are replayed from their seed). */
// In the future of the machine's clock: DynamoDB Local's items then never carry a TTL already passed in real time.
export const START = Date.UTC(2040, 0, 1);

/** The property: any schedule of any scenario keeps every invariant, with `variant` as the code under test. */
export interface RunStats {
  runs: number;
  /** Awaits the scheduler ordered, over all runs. */
  scheduledSteps: number;
  /** Runs in which some caller crashed, and in which the downstream has an effect. */
  withCrash: number;
  withEffect: number;
  /** Runs with a local tool's item committed in one request, on more than one key, with a key claimed again after its retention, with an operator's decision written. */
  withOneRequestCommit: number;
  withKeys: number;
  withExpiry: number;
  withOperatorDecision: number;
  /** Runs where an instance answered a key it remembered by reading its record first (local tools). */
  withRememberedKey: number;
  /** Runs where a request on the wire landed after its caller's deadline, and after its in-flight window (dedup). */
  withLandingAfterDeadline: number;
  withLandingAfterWindow: number;
}

export const newStats = (): RunStats => ({
  runs: 0,
  scheduledSteps: 0,
  withCrash: 0,
  withEffect: 0,
  withOneRequestCommit: 0,
  withKeys: 0,
  withExpiry: 0,
  withOperatorDecision: 0,
  withRememberedKey: 0,
  withLandingAfterDeadline: 0,
  withLandingAfterWindow: 0,
});

/** The counts of a run's stats, in words (each test prints them). */
export const describeStats = (stats: RunStats) =>
  `${stats.runs} runs, ${stats.scheduledSteps} scheduled awaits, ${stats.withCrash} with a crash, ${stats.withEffect} with an effect, ` +
  `${stats.withOneRequestCommit} with a one-request commit, ${stats.withKeys} on several keys, ${stats.withExpiry} with a key claimed again after ` +
  `its retention, ${stats.withOperatorDecision} with an operator's decision, ${stats.withRememberedKey} with a key an instance remembered, ` +
  `${stats.withLandingAfterDeadline} with a request landing after its caller's deadline, ${stats.withLandingAfterWindow} after its window`;

export function raceProperty(variant: Variant, options: ScenarioOptions, stats: RunStats = newStats()) {
  return fc.asyncProperty(fc.scheduler(), scenarioArbitrary(options), async (scheduler, scenario) => {
    const store = variant.makeStore?.() ?? new InMemoryIdempotencyStore();
    let keys = 0;
    const world = await runScenario({
      scheduler,
      scenario,
      variant,
      key: 'key-race-1',
      store,
      clock: worldClock(START, true),
      newKey: () => `key-race-new-${++keys}`,
      peek: (identity) => store.get(identity),
      peekItem: async (key) => store.item(key),
    });
    // Deadline timers of callers that crashed mid-execution: never fired, dropped with the run.
    vi.clearAllTimers();
    await checkRun(world, scheduler, stats);
  });
}

/** After a run: counts it into `stats`, then throws an InvariantViolation (with the run's story) if it broke one. */
export async function checkRun(world: World, scheduler: fc.Scheduler, stats: RunStats): Promise<void> {
  stats.runs++;
  stats.scheduledSteps += scheduler.report().filter((task) => task.status !== 'pending').length;
  if (world.actors.some((a) => a.dead)) stats.withCrash++;
  if (world.downstream.ledger.length > 0) stats.withEffect++;
  if (world.observations.some((o) => o.method === 'commitOnce' && o.before !== o.after)) stats.withOneRequestCommit++;
  if (world.keys.length > 1) stats.withKeys++;
  if (world.keys.some((key) => world.epochOf(key) > 0)) stats.withExpiry++;
  if (world.observations.some((o) => o.method === 'decide' && o.before !== o.after)) stats.withOperatorDecision++;
  if (world.actors.some((a) => a.name.endsWith('.again') && a.trace[0] === 'get')) stats.withRememberedKey++;
  if (world.landings.afterDeadline > 0) stats.withLandingAfterDeadline++;
  if (world.landings.afterWindow > 0) stats.withLandingAfterWindow++;
  const broken = await invariantViolations(world);
  if (broken.length > 0) throw new InvariantViolation(`${broken.join('\n')}\n${describeRun(world)}`);
}

/**
 * fast-check parameters, from the environment when set: FC_SEED and FC_PATH replay one failure (both are printed with
 * it), FC_RUNS changes how many runs are made.
 */
export function runParameters(numRuns: number): fc.Parameters<unknown> {
  const seed = process.env.FC_SEED;
  const path = process.env.FC_PATH;
  return {
    numRuns: Number(process.env.FC_RUNS ?? numRuns),
    ...(seed !== undefined ? { seed: Number(seed) } : {}),
    ...(path !== undefined ? { path } : {}),
  };
}
