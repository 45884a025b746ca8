/** What the engine reports (`EngineEvent['type']`). */
export type EngineEventType = EngineEvent['type'];

/**
 * One thing the engine did (executed, replayed, conflicted, ...), as an `IdempotencyObserver` sees it.
 * @public
 */
export interface EngineEvent {
  /** What the engine did; adapters turn these into metrics and log lines (never raw keys or arguments). */
  type:
    | 'executed'
    | 'replayed'
    | 'conflict'
    | 'in_progress'
    | 'unknown'
    | 'released'
    | 'failed'
    | 'review_required'
    | 'taken_over'
    | 'ownership_lost'
    | 'store_unavailable';
  /** The tool called. */
  tool: string;
  /** The caller's tenant. */
  tenant: string;
  /** A hash of the idempotency key (the logs' `key_hash`), never the key itself. */
  keyHash: string;
  /** How long the call took inside the engine. */
  durationMs: number;
  /**
   * The answer's error code (`ErrorCode`, or the tool's own code on failed and released); absent on executed, replayed,
   * taken_over and ownership_lost.
   */
  errorCode?: string;
}

/**
 * What the engine tells of its work (`EngineEvent`s): metrics and logs of your own.
 * @public
 */
export interface IdempotencyObserver {
  /** Called synchronously for each event, before the engine answers: keep it quick. */
  record(event: EngineEvent): void;
}

export const silentObserver: IdempotencyObserver = { record: () => {} };
