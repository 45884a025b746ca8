/**
 * What the engine reports; adapters turn these into metrics and log lines (never raw keys or arguments).
 *
 * @public
 */
export type EngineEventType =
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

/**
 * One thing the engine did (executed, replayed, conflicted, ...), as an `IdempotencyObserver` sees it.
 * @public
 */
export interface EngineEvent {
  type: EngineEventType;
  tool: string;
  tenant: string;
  /** `hashForLog` of the idempotency key. */
  keyHash: string;
  /** How long the call took inside the engine. */
  durationMs: number;
  errorCode?: string;
}

/**
 * What the engine tells of its work (`EngineEvent`s): metrics and logs of your own.
 * @public
 */
export interface IdempotencyObserver {
  record(event: EngineEvent): void;
}

export const silentObserver: IdempotencyObserver = { record: () => {} };
