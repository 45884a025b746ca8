import fc from 'fast-check';

/*
 * The scenarios the race exploration draws (races.ts): who calls with which key, which faults strike where, how
 * time and the reconciler move, as fast-check arbitraries.
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
export const ON_THE_WIRE: DownstreamFault[] = ['lands_late', 'lands_after_deadline', 'lands_after_window'];

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
