import { Logger } from '@aws-lambda-powertools/logger';
import fc from 'fast-check';
import { vi } from 'vitest';
import type { Clock } from '../../../lambdas/core/clock';
import { StoreUnavailableError, TerminalToolError, TransientToolError, UncertainToolError } from '../../../lambdas/core/errors';
import { leaseHasPassed } from '../../../lambdas/core/lease';
import type { WriteToolResult } from '../../../lambdas/core/result-contract';
import { transition, type IdempotencyRecord, type RecordState, type TransitionEvent } from '../../../lambdas/core/state-machine';
import { IdempotencyEngine, type ExecutionContext, type IdempotencyPolicy } from '../../../lambdas/engine/engine';
import { InMemoryIdempotencyStore } from '../../../lambdas/engine/in-memory-store';
import type { IdempotencyStore, RecordIdentity } from '../../../lambdas/engine/persistence';
import { Reconciler, type ToolReconciler } from '../../../lambdas/reconciler/reconciler';
import type { DynamoDBDocumentClient as DocumentClient } from '@aws-sdk/lib-dynamodb';

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
  | 'hang_after';

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
}

export function scenarioArbitrary(options: ScenarioOptions): fc.Arbitrary<Scenario> {
  const faults: DownstreamFault[] = options.faults ?? ['none', 'transient', 'terminal', 'commit_then_timeout'];
  if (options.hangs && !options.faults) faults.push('hang_before', 'hang_after');
  const caller = fc.record({
    intent: fc.constantFrom<'A' | 'B'>('A', 'A', 'B'),
    downstream: fc.oneof({ weight: 3, arbitrary: fc.constant<DownstreamFault>('none') }, { weight: 2, arbitrary: fc.constantFrom(...faults) }),
    fault: fc.option(
      fc.record({
        at: fc.nat({ max: 6 }),
        mode: fc.constantFrom<Fault['mode']>('crash_before', 'crash_after', 'store_error_before', 'store_error_after'),
      }),
      { nil: undefined, freq: 2 },
    ),
    mutatesInput: fc.boolean(),
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
    })
    .map((s) => ({
      ...s,
      // The engine's promise: re-running a stale execution is only declared safe for a downstream that dedups.
      reexecuteSafe: options.reexecuteSafe ?? (s.downstream === 'dedup' && s.reexecuteSafe),
    }));
}

// ---------------------------------------------------------------------------------------------------------------------
// The world: clock, downstream, actors
// ---------------------------------------------------------------------------------------------------------------------

export interface Effect {
  seq: number;
  key: string;
  intent: string;
  id: string;
}

/** The downstream system: a ledger of effects. `dedup` answers a second request with our key with the first effect. */
export class Downstream {
  readonly ledger: Effect[] = [];
  constructor(readonly dedup: boolean) {}

  act(key: string, intent: string): Effect {
    const earlier = this.dedup ? this.ledger.find((e) => e.key === key) : undefined;
    if (earlier) return earlier;
    const effect = { seq: this.ledger.length + 1, key, intent, id: `effect-${this.ledger.length + 1}` };
    this.ledger.push(effect);
    return effect;
  }

  /** What the reconcile hook asks: is there an effect with our key? */
  lookup(key: string): Effect | undefined {
    return this.ledger.find((e) => e.key === key);
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
    if (fault?.mode === 'store_error_after' && storeCall) throw new StoreUnavailableError('injected: the write was applied, its answer lost');
    return result;
  }

  private crash<T>(): Promise<T> {
    this.dead = true;
    return never<T>();
  }
}

/** The store as one actor sees it: each call is an await of that actor, applied under the store lock and observed. */
export class ActorStore implements IdempotencyStore {
  constructor(
    private readonly actor: Actor,
    private readonly world: World,
    private readonly inner: IdempotencyStore,
  ) {}

  private call<T>(method: string, identity: RecordIdentity, event: TransitionEvent | undefined, apply: () => Promise<T>): Promise<T> {
    return this.actor.step(method, () => this.world.observe(method, identity, event, apply), true);
  }

  claim: IdempotencyStore['claim'] = (record, now, options) => this.call('claim', record, 'claim', () => this.inner.claim(record, now, options));
  commitOnce: IdempotencyStore['commitOnce'] = (record, now, options, writes) =>
    this.call('commitOnce', record, undefined, () => this.inner.commitOnce(record, now, options, writes));
  get: IdempotencyStore['get'] = (identity) => this.call('get', identity, undefined, () => this.inner.get(identity));
  settle: IdempotencyStore['settle'] = (identity, ownerToken, settlement, now, writes) =>
    this.call('settle', identity, settlement.status === 'SUCCEEDED' ? 'complete' : 'fail', () =>
      this.inner.settle(identity, ownerToken, settlement, now, writes),
    );
  release: IdempotencyStore['release'] = (identity, ownerToken) => this.call('release', identity, 'release', () => this.inner.release(identity, ownerToken));
  markUnknown: IdempotencyStore['markUnknown'] = (identity, ownerToken, details, now) =>
    this.call('markUnknown', identity, 'uncertain', () => this.inner.markUnknown(identity, ownerToken, details, now));
  expireLease: IdempotencyStore['expireLease'] = (record, now) =>
    this.call('expireLease', record, 'lease_expired', () => this.inner.expireLease(record, now));
  reconcile: IdempotencyStore['reconcile'] = (record, outcome, now) =>
    this.call('reconcile', record, outcome.event, () => this.inner.reconcile(record, outcome, now));
  deferReconcile: IdempotencyStore['deferReconcile'] = (record, nextCheckAt, reason, now) =>
    this.call('deferReconcile', record, 'reconcile_deferred', () => this.inner.deferReconcile(record, nextCheckAt, reason, now));
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
  wrapStore?: (store: IdempotencyStore, context: { liveArgs?: Record<string, unknown>; clock: Clock }) => IdempotencyStore;
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
}

/** What `Reconciler.runOnce` does to one record: settle a due UNKNOWN, or mark a PROCESSING whose lease (+ grace) passed. */
export async function realReconcilePass(pass: ReconcilerPass, record: IdempotencyRecord | undefined, now: number, store: IdempotencyStore) {
  if (record?.status === 'UNKNOWN' && (record.nextCheckAt ?? record.updatedAt) <= now) await pass.settle(record, now);
  else if (record?.status === 'PROCESSING' && leaseHasPassed(record.leaseExpiresAt + TIMES.leaseGraceMs, now)) await store.expireLease(record, now);
}

// ---------------------------------------------------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------------------------------------------------

export interface Answer {
  caller: string;
  intent: string;
  key: string;
  phase: 'race' | 'retry';
  answer: WriteToolResult<unknown>;
  /** Effects with this answer's key in the ledger when the answer was given. */
  effectsAtAnswer: Effect[];
  recordAtAnswer: IdempotencyRecord | undefined;
}

export interface WorldOptions {
  scheduler: fc.Scheduler;
  scenario: Scenario;
  variant: Variant;
  key: string;
  store: IdempotencyStore;
  clock: WorldClock;
  /** A fresh key for the planted client that retries `unknown` with a new key. */
  newKey: () => string;
  /** Reads a record's state outside any actor (for observations and answers). */
  peek: (identity: RecordIdentity) => Promise<IdempotencyRecord | undefined>;
  /** DynamoDB: the table the reconciler's `runOnce` reads the attention index of. Without it, `realReconcilePass` over `key`. */
  index?: { doc: DocumentClient; tableName: string };
  /** How long nothing pending while an actor runs means it is stuck (real I/O takes longer than memory). */
  stuckAfterMs?: number;
}

export class World {
  readonly scheduler: fc.Scheduler;
  readonly downstream: Downstream;
  readonly answers: Answer[] = [];
  readonly observations: Observation[] = [];
  readonly violations: string[] = [];
  readonly actors: Actor[] = [];
  private lock: Promise<unknown> = Promise.resolve();

  constructor(readonly options: WorldOptions) {
    this.scheduler = options.scheduler;
    this.downstream = new Downstream(options.scenario.downstream === 'dedup' && !options.variant.dedupLies);
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
      if (Date.now() - started > (this.options.stuckAfterMs ?? 2_000)) throw new InvariantViolation(`${what} never finished, with nothing left to schedule`);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (failure) throw failure;
  }

  /** Applies one store call and records the transition it made; checks it against the code's table right away. */
  async observe<T>(method: string, identity: RecordIdentity, event: TransitionEvent | undefined, apply: () => Promise<T>): Promise<T> {
    if (!sameIdentity(identity, this.options.key, this.options.scenario)) return apply();
    const before = await this.options.peek(identity);
    let result: T;
    try {
      result = await apply();
    } finally {
      const after = await this.options.peek(identity);
      this.check(method, event, before, after);
    }
    return result;
  }

  private check(method: string, event: TransitionEvent | undefined, before: IdempotencyRecord | undefined, after: IdempotencyRecord | undefined) {
    const from: RecordState = before?.status ?? 'ABSENT';
    const to: RecordState = after?.status ?? 'ABSENT';
    const changed = stable(before) !== stable(after);
    const ownerChanged = before?.ownerToken !== after?.ownerToken;
    this.observations.push({ method, event, before: from, after: to, ownerChanged });
    if (!changed) return;
    if (method === 'get') return this.violation(`a read changed the record: ${from} -> ${to}`);
    // A claim over a key freed by time is `expire` then `claim`; commitOnce is `claim` then `complete|fail`.
    const allowed = (e: TransitionEvent) => {
      try {
        return transition(from, e) === to;
      } catch {
        return false;
      }
    };
    const legal = event
      ? allowed(event) || (event === 'claim' && isExpiredThenClaimed(from, to))
      : method === 'commitOnce' && from === 'ABSENT' && (to === 'SUCCEEDED' || to === 'FAILED');
    if (!legal) this.violation(`store.${method} moved the record ${from} -> ${to}${event ? ` as '${event}'` : ''}: not in the transition table`);
  }

  violation(message: string) {
    this.violations.push(message);
  }

  /** A caller: its own engine (a Lambda instance), its own store view and downstream view, faults as planned. */
  startCaller(name: string, plan: CallerPlan, key: string, phase: Answer['phase'], fault: Fault | undefined): Promise<void> {
    const actor = new Actor(name, this, fault);
    this.actors.push(actor);
    const args: Record<string, unknown> = { intent: plan.intent, amount: plan.intent === 'A' ? 100 : 200, note: 'as sent' };
    const store = this.storeFor(actor, args);
    const engine = new IdempotencyEngine({
      store,
      clock: this.options.clock.clock,
      inProgressWaitMs: TIMES.inProgressWaitMs,
      completionMarginMs: TIMES.completionMarginMs,
      sleep: (ms) =>
        actor.step(
          `sleep ${ms}`,
          async () => {
            this.options.clock.advance(ms);
          },
          false,
        ),
    });
    const policy: IdempotencyPolicy = { reexecuteSafe: this.options.scenario.reexecuteSafe, executionTimeoutMs: TIMES.executionTimeoutMs };
    const execute = async (ctx: ExecutionContext) => {
      if (plan.mutatesInput) args.note = 'normalised by the handler';
      const fault = plan.downstream;
      await actor.step('downstream request', async () => {}, false);
      if (fault === 'transient') throw new TransientToolError('DOWNSTREAM_BUSY', 'the downstream refused before acting');
      // A downstream that dedups answers a key it already acted on with that effect, before any business rule.
      const acted = this.downstream.dedup && this.downstream.lookup(ctx.idempotencyKey) !== undefined;
      if (fault === 'terminal' && !acted) throw new TerminalToolError('DECLINED', 'the downstream declined');
      if (fault === 'hang_before') return never<never>();
      // The downstream honours the call's deadline (the engine hands it the signal): nothing lands after it. This is
      // the assumption the promise for a downstream without dedup rests on (docs/correctness.md).
      const effect = await actor.step(
        'downstream lands',
        async () => (ctx.signal.aborted || this.options.clock.clock() >= ctx.deadline ? undefined : this.downstream.act(ctx.idempotencyKey, plan.intent)),
        false,
      );
      if (!effect) throw new UncertainToolError('ABORTED', 'the call was aborted at its deadline');
      if (fault === 'hang_after') return never<never>();
      await actor.step('downstream answers', async () => {}, false);
      if (fault === 'commit_then_timeout') throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'the downstream did not answer in time');
      return { result: { effect: effect.id, intent: effect.intent } };
    };
    return new Promise<void>((resolve) => {
      engine
        .run({ tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { ...args } }, policy, (ctx) => execute(ctx))
        .then(
          async (answer) => {
            await this.options.variant.afterRun?.(answer, store, { tenant: TENANT, tool: TOOL, idempotencyKey: key });
            const recordAtAnswer = await this.options.peek({ tenant: TENANT, tool: TOOL, idempotencyKey: key });
            const effectsAtAnswer = this.downstream.ledger.filter((e) => e.key === key);
            this.answers.push({ caller: name, intent: plan.intent, key, phase, answer, effectsAtAnswer, recordAtAnswer });
          },
          (err: unknown) => this.violation(`${name} threw instead of answering: ${String(err)}`),
        )
        .finally(resolve);
    });
  }

  private storeFor(actor: Actor, liveArgs?: Record<string, unknown>): IdempotencyStore {
    const base = this.options.variant.wrapStore
      ? this.options.variant.wrapStore(this.options.store, { liveArgs, clock: this.options.clock.clock })
      : this.options.store;
    return new ActorStore(actor, this, base);
  }

  reconcilerPass(actor: Actor): ReconcilerPass {
    const store = this.storeFor(actor);
    const tools = new Map<string, ToolReconciler>([
      [
        TOOL,
        {
          onAbsent: this.options.scenario.onAbsent,
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
      // The per-record step reads nothing through the index; runOnce (DynamoDB run) gets the real client.
      doc: this.options.index?.doc ?? (undefined as unknown as DocumentClient),
      tableName: this.options.index?.tableName ?? 'unused',
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
    const record = await store.get({ tenant: TENANT, tool: TOOL, idempotencyKey: this.options.key });
    const now = this.options.clock.clock();
    if (this.options.variant.reconcilePass) return this.options.variant.reconcilePass(pass, record, now);
    return realReconcilePass(pass, record, now, store);
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

function sameIdentity(identity: RecordIdentity, key: string, _scenario: Scenario) {
  return identity.tenant === TENANT && identity.tool === TOOL && identity.idempotencyKey === key;
}

function isExpiredThenClaimed(from: RecordState, to: RecordState) {
  try {
    return transition(transition(from, 'expire'), 'claim') === to;
  } catch {
    return false;
  }
}

/**
 * One run: the callers race under the driver; then the world settles (time passes every lease, the reconciler runs
 * until nothing is due), every caller whose answer invites a retry (or whose process died) retries once, and the
 * world settles again. Returns the world for the invariants.
 */
export async function runScenario(options: WorldOptions): Promise<World> {
  const world = new World(options);
  const { scenario, key } = options;
  // Not awaited: a caller that crashed never answers, one that hangs answers when time reaches its deadline.
  for (const [i, plan] of scenario.callers.entries()) void world.startCaller(`caller${i}`, plan, key, 'race', plan.fault);
  await world.runUntil(world.drive(scenario.driver), 'the driver');
  await settleWorld(world);
  // Clients: a call that died or that was told to retry is sent again, with the same key (or, planted, a new one).
  const retries: Promise<void>[] = [];
  for (const [i, plan] of scenario.callers.entries()) {
    const name = `caller${i}`;
    const answer = world.answers.find((a) => a.caller === name && a.phase === 'race');
    if (answer && !answer.answer.retryable) continue;
    const newKey = options.variant.retryUnknownWithNewKey && answer?.answer.outcome === 'unknown';
    // The retry meets no fault of its own: it shows what the key now answers.
    retries.push(world.startCaller(`${name}.retry`, { ...plan, downstream: 'none' }, newKey ? options.newKey() : key, 'retry', undefined));
  }
  await world.runUntil(Promise.all(retries), 'a retry');
  await settleWorld(world);
  return world;
}

/** Past every lease and grace; reconciler passes (with time for their backoff) until the record rests. */
async function settleWorld(world: World) {
  const { clock } = world.options;
  for (let pass = 0; pass < TIMES.maxAttempts + 3; pass++) {
    await world.locked(async () => clock.advance(TIMES.executionTimeoutMs + TIMES.completionMarginMs + TIMES.leaseGraceMs + 2 ** pass * TIMES.backoffBaseMs));
    await world.runUntil(world.reconcileOnce(`settle#${pass}`), 'a reconciler pass');
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------------------------------------------------

/** Every invariant of issue 23 item 2 that a run of the real engine can show; returns the broken ones, in words. */
export async function invariantViolations(world: World): Promise<string[]> {
  const broken = [...world.violations];
  const { key } = world.options;
  const ledger = world.downstream.ledger;

  // 1. At most one effect per key, and per intent (a client's one operation, whatever key it was sent with).
  const byKey = ledger.filter((e) => e.key === key);
  if (byKey.length > 1) broken.push(`${byKey.length} effects for one key: ${byKey.map((e) => e.id).join(', ')}`);
  for (const intent of ['A', 'B']) {
    const n = ledger.filter((e) => e.intent === intent).length;
    if (n > 1) broken.push(`${n} effects for one intent (${intent})`);
  }

  // 2. Every succeeded answer for a key carries the same result (the effect's), and only one is not a replay.
  const succeeded = world.answers.filter((a) => a.key === key && a.answer.outcome === 'succeeded');
  const results = new Set(succeeded.map((a) => stable(a.answer.result)));
  if (results.size > 1) broken.push(`succeeded answers with different results: ${[...results].join(' / ')}`);
  for (const a of succeeded) {
    const result = a.answer.result as { effect?: string } | undefined;
    if (!byKey.some((e) => e.id === result?.effect)) broken.push(`${a.caller} succeeded with ${JSON.stringify(result)}, which no effect carries`);
  }
  const executions = succeeded.filter((a) => !a.answer.replayed);
  if (executions.length > 1) broken.push(`${executions.length} answers say they executed (not replayed): ${executions.map((a) => a.caller).join(', ')}`);

  // 3. No answer says nothing ran while an effect exists: a failure (retryable: "the key is free, call again"; or
  //    terminal: "declined"), or a conflict refusing the very arguments that took effect.
  for (const a of world.answers) {
    const { outcome, retryable, error } = a.answer;
    if (outcome === 'failed' && error?.code !== 'REVIEW_REQUIRED' && a.effectsAtAnswer.length > 0) {
      broken.push(`${a.caller} was told ${retryable ? 'to retry, nothing ran' : `it failed (${error?.code})`} while ${a.effectsAtAnswer[0]!.id} exists`);
    }
    if (outcome === 'conflict' && a.effectsAtAnswer.some((e) => e.intent === a.intent)) {
      broken.push(`${a.caller} was refused as a conflict although its own arguments took effect`);
    }
  }

  // 5. Progress: after every lease passed and the reconciler ran, nothing is in progress or unknown.
  const final = await world.options.peek({ tenant: TENANT, tool: TOOL, idempotencyKey: key });
  if (final && (final.status === 'PROCESSING' || final.status === 'UNKNOWN')) {
    broken.push(`the record stays ${final.status} after every lease passed and the reconciler ran`);
  }
  // ... and the record says what the downstream has.
  if (final?.status === 'SUCCEEDED' && !byKey.some((e) => e.id === (final.result as { effect?: string })?.effect)) {
    broken.push(`the record is SUCCEEDED with ${JSON.stringify(final.result)}, which no effect carries`);
  }
  if (final?.status === 'FAILED' && byKey.length > 0) broken.push(`the record is FAILED while ${byKey[0]!.id} exists`);
  if (!final && byKey.length > 0) broken.push(`the key is free while ${byKey[0]!.id} exists: a retry would run it again`);
  return broken;
}

/** What a failing run prints besides fast-check's seed and path: each actor's awaits, in order. */
export function describeRun(world: World): string {
  const lines = world.actors.map((a) => `  ${a.name}${a.dead ? ' (crashed)' : ''}: ${a.trace.join(' > ')}`);
  const answers = world.answers.map((a) => `  ${a.caller} [${a.phase}] -> ${a.answer.outcome}${a.answer.replayed ? ' (replayed)' : ''} ${JSON.stringify(a.answer.result ?? a.answer.error?.code ?? '')}`);
  const ledger = world.downstream.ledger.map((e) => `  ${e.id} key=${e.key} intent=${e.intent}`);
  return ['actors:', ...lines, 'answers:', ...answers, 'ledger:', ...ledger].join('\n');
}

// ---------------------------------------------------------------------------------------------------------------------
// The in-memory exploration (CI) and its replay
// ---------------------------------------------------------------------------------------------------------------------

/** Epoch ms the runs start at (any fixed instant: runs are replayed from their seed). */
export const START = Date.UTC(2026, 0, 1);

/** The property: any schedule of any scenario keeps every invariant, with `variant` as the code under test. */
export interface RunStats {
  runs: number;
  /** Awaits the scheduler ordered, over all runs. */
  scheduledSteps: number;
  /** Runs in which some caller crashed, and in which the downstream has an effect. */
  withCrash: number;
  withEffect: number;
}

export const newStats = (): RunStats => ({ runs: 0, scheduledSteps: 0, withCrash: 0, withEffect: 0 });

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
