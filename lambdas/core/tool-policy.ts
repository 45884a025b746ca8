/**
 * A write tool's idempotency settings and their defaults, with the in-flight window they give (the rule itself is in
 * in-flight.ts). Pure: the engine, the reconciler and `ops` read a tool's settings here, never from the environment.
 */
import { DEFAULT_NON_BUSINESS_FIELDS } from './fingerprint';
import { DEFAULT_DOWNSTREAM_TIMEOUT_MS, inFlightWindowMs } from './in-flight';

/**
 * Per-tool idempotency settings; every field has a default a newcomer can leave alone.
 *
 * @public
 */
export interface IdempotencyPolicy {
  /** Top-level arguments left out of the fingerprint. Default: trace_id, request_id, requested_at. */
  nonBusinessFields?: readonly string[];
  /** How long duplicates replay the stored result. Default 24 h. */
  retentionSeconds?: number;
  /** After retention: execute again (default) or refuse with REVIEW_REQUIRED. */
  onExpired?: 'execute' | 'review';
  /** With onExpired 'review': how long after retention the key is still remembered. Default 30 days. */
  reviewWindowSeconds?: number;
  /**
   * Re-running a stale execution cannot repeat its effect: the downstream deduplicates by our key (a repeated
   * request gets the first one's result), or the tool's effect is local (it commits with the record). Never for a
   * downstream that acts on every request it receives. Default false.
   */
  reexecuteSafe?: boolean;
  /** Upper bound of one execution; the Lambda's remaining time may shorten it. Default 10 s. */
  executionTimeoutMs?: number;
  /**
   * How long after it was sent a downstream request may still apply its effect (the provider keeps processing a
   * request we gave up on). Until it has passed, a lookup answering "absent" decides nothing: the record stays
   * UNKNOWN and is checked at the window's end. Default `executionTimeoutMs` + DOWNSTREAM_TIMEOUT_MS: the longest
   * one request is waited for, plus one more such span for the provider's own queueing and retries, counted from the
   * last moment a request can have been sent. Set it to your provider's documented processing bound when it has a
   * longer one.
   */
  inFlightWindowMs?: number;
  /** Largest result kept in the record (bytes of JSON). Default 64 KiB. */
  maxResultBytes?: number;
}

/**
 * The defaults; the window's is derived from the timeouts (`toolInFlightWindowMs`), so it has none here.
 */
export const DEFAULT_POLICY: Required<Omit<IdempotencyPolicy, 'inFlightWindowMs'>> & Pick<IdempotencyPolicy, 'inFlightWindowMs'> = {
  nonBusinessFields: DEFAULT_NON_BUSINESS_FIELDS,
  retentionSeconds: 24 * 3600,
  onExpired: 'execute',
  reviewWindowSeconds: 30 * 24 * 3600,
  reexecuteSafe: false,
  executionTimeoutMs: 10_000,
  maxResultBytes: 64 * 1024,
};

/**
 * A tool's in-flight window (lambdas/core/in-flight.ts): its `inFlightWindowMs`, else the default from its execution
 * timeout and the downstream timeout. A local tool sends no request (its effect commits with the record, or not at
 * all): nothing is in flight, 0 unless it says otherwise. The engine and the reconciler both read it here.
 */
export function toolInFlightWindowMs(
  policy: IdempotencyPolicy,
  downstreamTimeoutMs: number = DEFAULT_DOWNSTREAM_TIMEOUT_MS,
  effect: ToolEffect = 'external',
): number {
  if (effect === 'local') return policy.inFlightWindowMs ?? 0;
  return inFlightWindowMs(
    { executionTimeoutMs: policy.executionTimeoutMs ?? DEFAULT_POLICY.executionTimeoutMs, inFlightWindowMs: policy.inFlightWindowMs },
    downstreamTimeoutMs,
  );
}

/**
 * 'local': `execute` computes the result and the items to write and calls nothing outside (its own table, an outbox
 * event), so the record and the items commit in one request. 'external' (default): it calls another system, so the
 * key is claimed before and settled after.
 * @public
 */
export type ToolEffect = 'local' | 'external';
