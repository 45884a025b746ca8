import type { SpinRun } from './spin';

/*
 * The runs of the spin models (spin.ts runs them): the bound profiles of the protocol model, the runs that must pass
 * on main, progress under weak fairness, each planted bug with the run that must catch it, and the findings.
 */

/**
 * Bound profiles of the protocol model for the invariants: each runs exhaustively in seconds. FORGETS (the
 * downstream's memory of a key ending once its record settled and its window passed) rides with the retention
 * profile, the other end of a key's life.
 */
export const PROFILES = {
  /** A crash of any caller at any step (also with its request on the wire), and one fault (downstream, store or a lost answer). */
  crash_fault: { CRASHES: 1, FAULTS: 1, SLOW: 0, OPS: 0, EXPIRES: 0, FORGETS: 0 },
  /** A lease that passes while its executor lives (also with its request on the wire), and one fault. */
  slow_fault: { CRASHES: 0, FAULTS: 1, SLOW: 1, OPS: 0, EXPIRES: 0, FORGETS: 0 },
  /** A crash and a lease that passes while its executor lives. */
  crash_slow: { CRASHES: 1, FAULTS: 0, SLOW: 1, OPS: 0, EXPIRES: 0, FORGETS: 0 },
  /** The operator's settle, the end of retention and of the downstream's memory, with a slow executor. */
  operator_retention: { CRASHES: 0, FAULTS: 0, SLOW: 1, OPS: 1, EXPIRES: 1, FORGETS: 1 },
} as const;

/** Planted bugs need few of the bounds: each run below turns on only what its counterexample needs. */
const NONE = { CRASHES: 0, FAULTS: 0, SLOW: 0, OPS: 0, EXPIRES: 0, FORGETS: 0 } as const;

export const KINDS = { dedup_downstream: 0, plain_downstream: 1, local_one_request: 2 } as const;

const protocol = (params: SpinRun['params']): SpinRun => ({ model: 'protocol.pml', params, shortest: true });

/** Each planted bug and the run that must catch it. */
export const PLANTED: Array<{ flag: string; what: string; run: SpinRun }> = [
  {
    flag: 'PLANT_NO_FENCE',
    what: 'completion without the owner fence',
    run: protocol({ KIND: 0, ...NONE, SLOW: 1, PLANT_NO_FENCE: true }),
  },
  {
    flag: 'PLANT_RELEASE_NOT_HELD',
    what: 'releasing a lock this call does not hold',
    run: protocol({ KIND: 1, ...NONE, PLANT_RELEASE_NOT_HELD: true }),
  },
  {
    flag: 'PLANT_MUTATED_ARGS',
    what: 'completion keyed by arguments changed after the claim',
    run: protocol({ KIND: 1, ...NONE, PLANT_MUTATED_ARGS: true }),
  },
  {
    flag: 'PLANT_NO_DEADLINE',
    what: 'an in-progress record without a deadline taken as orphaned',
    run: protocol({ KIND: 1, ...NONE, PLANT_NO_DEADLINE: true }),
  },
  {
    flag: 'PLANT_RECONCILE_LIVE_LEASE',
    what: "the reconciler settling `absent` while the first call's lease still runs",
    run: protocol({ KIND: 1, ...NONE, PLANT_RECONCILE_LIVE_LEASE: true }),
  },
  {
    flag: 'PLANT_NEW_KEY_ON_UNKNOWN',
    what: 'a client that retries `unknown` with a new key',
    run: protocol({ KIND: 1, ...NONE, FAULTS: 1, PLANT_NEW_KEY_ON_UNKNOWN: true }),
  },
  {
    flag: 'PLANT_ABSENT_IN_WINDOW',
    what: 'the reconciler concluding `absent` while a request may still land (inside its in-flight window)',
    run: protocol({ KIND: 1, ...NONE, FAULTS: 1, PLANT_ABSENT_IN_WINDOW: true }),
  },
  {
    flag: 'PLANT_TAKEOVER_IN_WINDOW',
    what: 'a takeover after a lost lease that takes "nothing found" inside the window as absent and runs again',
    run: protocol({ KIND: 1, ...NONE, SLOW: 1, PLANT_TAKEOVER_IN_WINDOW: true }),
  },
  {
    flag: 'PLANT_SHORT_MEMORY',
    what: 'a downstream whose dedup and lookup forget a key before its record settled',
    run: protocol({ KIND: 0, ...NONE, FAULTS: 1, FORGETS: 1, PLANT_SHORT_MEMORY: true }),
  },
  {
    flag: 'PLANT_NO_CONSUMER_DEDUP',
    what: 'a consumer without dedup',
    run: { model: 'outbox.pml', params: { PLANT_NO_CONSUMER_DEDUP: true }, shortest: true },
  },
  {
    flag: 'PLANT_VERIFY_IN_WINDOW',
    what: 'the outbox consumer\'s lookup (`verify`) taking "nothing found" inside the window as absent',
    run: { model: 'outbox.pml', params: { PLANT_VERIFY_IN_WINDOW: true }, shortest: true },
  },
];

/** What the model found in the engine as it is on main (docs/correctness.md, "Findings"): each flag restores it. */
export const FINDINGS: Array<{ flag: string; what: string; run: SpinRun }> = [
  {
    flag: 'FINDING_REPLAY_OTHER_ARGS',
    what: 'a fenced-out executor answers the result of other arguments',
    run: protocol({ KIND: 1, ...NONE, SLOW: 1, FINDING_REPLAY_OTHER_ARGS: true }),
  },
  {
    flag: 'FINDING_RELEASE_AFTER_TAKEOVER',
    what: 'a taken-over execution that fails transiently releases the key',
    run: protocol({ KIND: 0, ...NONE, CRASHES: 1, SLOW: 1, FINDING_RELEASE_AFTER_TAKEOVER: true }),
  },
];

/** The runs that must pass on main. */
export const CLEAN: Array<{ name: string; run: SpinRun }> = [
  ...Object.entries(KINDS).flatMap(([kind, KIND]) =>
    Object.entries(PROFILES).map(([profile, bounds]) => ({
      name: `protocol ${kind} ${profile}`,
      run: { model: 'protocol.pml' as const, params: { KIND, ...bounds } },
    })),
  ),
  { name: 'outbox', run: { model: 'outbox.pml', params: {} } },
];

/**
 * Bound profiles for progress under weak fairness (`pan -a -f`), one bound each: the fairness search costs about ten
 * times the safety one (a crash and a fault together take minutes). Every intent ends with a final answer (or a
 * record parked for a person) and no record stays PROCESSING or UNKNOWN, in every fair run with that one bound.
 * Without a crash, a fault or a slow executor no record is ever UNKNOWN, so the operator has nothing to settle: its
 * decisions and the end of retention stay with the safety profiles.
 */
export const PROGRESS_PROFILES = {
  crash: { CRASHES: 1, FAULTS: 0, SLOW: 0, OPS: 0, EXPIRES: 0, FORGETS: 0 },
  fault: { CRASHES: 0, FAULTS: 1, SLOW: 0, OPS: 0, EXPIRES: 0, FORGETS: 0 },
  slow: { CRASHES: 0, FAULTS: 0, SLOW: 1, OPS: 0, EXPIRES: 0, FORGETS: 0 },
} as const;

/** Progress under weak fairness: every tool kind with every progress profile, and the outbox. */
export const LIVENESS: Array<{ name: string; run: SpinRun }> = [
  ...Object.entries(KINDS).flatMap(([kind, KIND]) =>
    Object.entries(PROGRESS_PROFILES).map(([profile, bounds]) => ({
      name: `protocol ${kind} progress ${profile}`,
      run: { model: 'protocol.pml' as const, params: { KIND, ...bounds }, liveness: true },
    })),
  ),
  { name: 'outbox progress', run: { model: 'outbox.pml', params: {}, liveness: true } },
];

/**
 * The progress check on its own catches a livelock: with the in-progress record taken as orphaned, two callers take
 * the key from each other for ever. Assertions are ignored (`pan -A`) so the search looks for the cycle only.
 */
export const PLANTED_LIVELOCK: { flag: string; what: string; run: SpinRun } = {
  flag: 'PLANT_NO_DEADLINE',
  what: 'an in-progress record without a deadline taken as orphaned (progress only)',
  run: { model: 'protocol.pml', params: { KIND: 1, ...NONE, PLANT_NO_DEADLINE: true }, liveness: true, cyclesOnly: true },
};
