/**
 * The outbox's timing rules, pure: the relay, the consumer, the configuration, the local queue and the CDK stack
 * read them from here, so they agree.
 */
export const OutboxDefaults = {
  /**
   * A committed event is normally delivered within this long: the relay sends it as it commits and the consumer takes
   * it at once. One still pending after it is late (a crashed relay or consumer, a refusing downstream) and `ops list`
   * shows it, before the sweep's first look sends it again.
   */
  expectedDeliveryMs: 10_000,
  /** The sweep looks again at a sent but undelivered event after this long, doubling each time. */
  redeliverAfterMs: 60_000,
  redeliverMaxBackoffMs: 60 * 60_000,
  /** After this many sends without a delivery the sweep gives up: FAILED, logged and counted. */
  maxSends: 8,
  /** Events and delivery claims are kept this long for status look-ups and duplicate detection. */
  retentionSeconds: 14 * 24 * 3600,
  /** How long a delivery the downstream keeps refusing is retried, from the event's commit (OUTBOX_DELIVERY_BUDGET_SECONDS). */
  deliveryBudgetSeconds: 24 * 3600,
  /** The longest a budget may be: the queue keeps a message at most 14 days, and must outlive the budget. */
  maxDeliveryBudgetSeconds: 13 * 24 * 3600,
  /** First wait before a delivery is tried again, doubling per receive. */
  retryBaseMs: 1000,
  /** The longest wait between two tries: SQS extends a message's visibility by at most 12 hours at a time. */
  maxRetryDelayMs: 12 * 3600_000,
} as const;

/** Receives beyond the schedule: the last try clipped to the budget's end, a settlement retried, a duplicate's wait. */
const RECEIVE_MARGIN = 3;

/**
 * The receives one message can take while its delivery budget lasts: every retry waits at least
 * `baseMs * 2^(receive - 1)` (capped at the longest visibility), so the count is bounded by the budget. The queue's
 * redrive count must be at least this, or SQS would dead-letter a message whose budget still allows another try.
 */
export function receivesWithinBudget(budgetMs: number, baseMs: number = OutboxDefaults.retryBaseMs): number {
  const base = Math.max(1, baseMs);
  let receives = 1;
  for (let waited = 0; waited < budgetMs; receives++) waited += Math.min(base * 2 ** (receives - 1), OutboxDefaults.maxRetryDelayMs);
  return receives + RECEIVE_MARGIN;
}
