import type { IdempotencyRecord } from './state-machine';

/**
 * What a tool's downstream says about an operation whose outcome we lost (UNKNOWN or a stale PROCESSING).
 * The reconciler turns a finding into one state transition; tools only answer the question.
 * @public
 */
export type ReconcileFinding =
  /** The effect happened: settle SUCCEEDED with the downstream's result. */
  | { kind: 'found'; result: unknown }
  /** Confirmed absent: release the key (a retry executes), or FAILED where the tool's policy says so. */
  | { kind: 'absent' }
  /** The downstream could not answer: keep the record and ask again later, with backoff. */
  | { kind: 'unreachable'; reason: string };

/**
 * What to do with a record the downstream confirms absent.
 *
 * @public
 */
export type AbsentPolicy = 'release' | 'fail';

/**
 * What a tool's reconcile hook is asked about: the record, and a signal aborted when its budget runs out.
 * @public
 */
export interface ReconcileRequest {
  /** The UNKNOWN record to settle, as the reconciler read it (its key, tenant, `memo`). */
  record: IdempotencyRecord;
  /** Aborted when the reconciler's own budget for this record runs out. */
  signal: AbortSignal;
}
