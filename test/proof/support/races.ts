import fc from 'fast-check';
import { vi } from 'vitest';
import { InMemoryIdempotencyStore } from '../../../lambdas/engine/in-memory-store';
import { type Effect, InvariantViolation, type Variant, worldClock } from './races-actors';
import { type CallerPlan, scenarioArbitrary, type ScenarioOptions, TENANT, TIMES, TOOL } from './races-scenarios';
import { type Answer, World, type WorldOptions } from './races-world';

/*
 * The race exploration of the real engine (issue 23 item 5). fast-check's scheduler decides the order in which every
 * await of every actor resumes: each store call and each downstream call of each caller, each reconciler pass, each
 * step of time. The engine, the store and the reconciler are the project's own; only the world around them is made
 * up here: a downstream with a ledger of effects, callers that crash or meet faults at a chosen await, a clock.
 * This file runs a scenario and checks what it left; races-scenarios.ts draws the scenarios, races-world.ts and
 * races-actors.ts are the world, races-tools.ts the tools its callers run.
 */

/** One scenario to its end: the race, the clients' retries, the calls after every retention, the world settled. */
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
