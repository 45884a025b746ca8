import type fc from 'fast-check';
import { ErrorCode } from '../../../lambdas/core/errors';
import { absenceIsConclusive, decidableAt } from '../../../lambdas/core/in-flight';
import type { WriteToolResult } from '../../../lambdas/core/result-contract';
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
import type {
  ExtraWrite,
  IdempotencyStore,
  OperatorDecision,
  RecordIdentity,
  RecordQueries,
  ReviewStore,
} from '../../../lambdas/engine/persistence';
import type { ToolReconciler } from '../../../lambdas/reconciler/reconciler';
import {
  Actor,
  ActorStore,
  Downstream,
  type Effect,
  InvariantViolation,
  type Observation,
  realReconcilePass,
  ReconcilerPass,
  silentLogger,
  stable,
  type Variant,
  type WorldClock,
} from './races-actors';
import { type CallerPlan, type DriverStep, type Fault, ON_THE_WIRE, type Scenario, TENANT, TIMES, TOOL } from './races-scenarios';
import { downstreamTool, localTool, type PlannedCall } from './races-tools';

/*
 * The world a scenario of the race exploration runs in (races.ts runs it): the callers, each with its own engine as
 * a Lambda instance has, the reconciler's passes and the operators' looks, and the checks made at every step of the
 * scheduler; its parts are in races-actors.ts, the callers' tools in races-tools.ts.
 */

/** One call's answer, with what the ledger and the record held when it was given. */
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
  peekItem: (key: ExtraWrite['create']['key']) => Promise<Record<string, unknown> | undefined>;
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
  /** The next item a local tool writes (races-tools.ts). */
  nextLocalItem(): number {
    return ++this.localItems;
  }
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
    const call: PlannedCall = { world: this, actor, plan, args, operation, policy };
    const executeLocally = localTool(call);
    const execute = downstreamTool(call);
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
