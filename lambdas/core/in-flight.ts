/**
 * The in-flight window, one rule for every component that asks a downstream what became of an operation (the
 * engine, the reconciler, the outbox consumer). A request we sent may still apply its effect after our side gave up
 * on it: our HTTP client aborts, the executor times out, crashes or is fenced out, but the provider does not see
 * any of that and keeps processing a request it received. A lookup by key answering "absent" is therefore
 * authoritative only once every request that could still land has landed: until then it decides nothing (the key
 * is neither released, nor failed, nor re-executed), and the lookup is asked again when the window has passed.
 */

/**
 * The bound of one downstream call when DOWNSTREAM_TIMEOUT_MS is not set (lambdas/config.ts reads the variable with
 * this default): an HTTP client gives up on an answer after it, so it is half of the default window.
 */
export const DEFAULT_DOWNSTREAM_TIMEOUT_MS = 3000;

/** The timeouts that end a downstream request on our side: the first to pass aborts it. */
export interface RequestTimeouts {
  /** The tool's execution budget (`idempotency.executionTimeoutMs`): its deadline aborts every request it sent. */
  executionTimeoutMs: number;
  /** The bound of one downstream call (DOWNSTREAM_TIMEOUT_MS): an HTTP client gives up on an answer after it. */
  downstreamTimeoutMs: number;
}

/**
 * The default window: the sum of the two timeouts that end a request on our side. The provider cannot see when we
 * stopped waiting; what bounds its processing is its own timeouts, which a provider sizes for its callers' (a
 * request that routinely outlives its callers' patience would fail them all). The longest we ever wait for one
 * request is the longer of the two; the sum adds one more such span for the provider's own queueing and retries,
 * so it is the conservative choice. It is counted from the last moment a request can have been sent (the end of
 * the execution's lease, or the moment its executor stopped), never from the request's answer. A window too long
 * only delays when an UNKNOWN becomes decidable (the caller is told when to come back); one too short can release
 * a key whose effect is still on its way. A tool whose provider documents a longer processing time (a transfer
 * booked in a nightly batch) sets `inFlightWindowMs` to it.
 */
export function defaultInFlightWindowMs(timeouts: RequestTimeouts): number {
  return timeouts.executionTimeoutMs + timeouts.downstreamTimeoutMs;
}

/** A tool's window: its own `inFlightWindowMs` when set, else the default from its timeouts. */
export function inFlightWindowMs(policy: { inFlightWindowMs?: number; executionTimeoutMs: number }, downstreamTimeoutMs: number): number {
  return policy.inFlightWindowMs ?? defaultInFlightWindowMs({ executionTimeoutMs: policy.executionTimeoutMs, downstreamTimeoutMs });
}

/**
 * Until when a request of an execution may still apply its effect: the last moment the execution could send one
 * plus the window. The send time is never written: every request goes out between the claim and the execution's
 * deadline, which is before its lease ends, so `lastSendAt` is the lease's end (a follower or the reconciler
 * finding it stale, a takeover) or the moment the executor stopped, when it records its own uncertain outcome.
 */
export function inFlightUntil(lastSendAt: number, windowMs: number): number {
  return lastSendAt + windowMs;
}

/**
 * Whether a lookup made at `now` that found nothing is authoritative: every request that could still land has
 * landed. At the window's end exactly it is (the same comparison as the lease rule).
 */
export function absenceIsConclusive(until: number, now: number): boolean {
  return until <= now;
}

/**
 * When a record's absence becomes conclusive: the window stored with its UNKNOWN transition, or, for a record
 * written before the window was kept, the window counted from its lease's end (every request of it was sent before).
 */
export function decidableAt(record: { inFlightUntil?: number; leaseExpiresAt: number }, windowMs: number): number {
  return record.inFlightUntil ?? inFlightUntil(record.leaseExpiresAt, windowMs);
}

/**
 * The `retry_after_ms` of an `unknown` answer: inside the window, its rest plus one reconciler period (the first
 * check comes at the window's end and settles the record within a period); after it, one period.
 */
export function unknownRetryAfterMs(decidable: number, now: number, periodMs: number): number {
  return Math.max(0, decidable - now) + periodMs;
}
