/**
 * The lease rule, one for every claim in the project: the engine's PROCESSING record (`leaseExpiresAt`) and the
 * outbox consumer's delivery claim (`leaseUntil`). A holder is protected until its lease ends; at that instant and
 * after, the claim no longer protects it, and another executor may take over (or, when re-running is not safe,
 * the outcome must be verified). Store adapters render the same comparison in their conditions.
 */
export function leaseHasPassed(leaseUntil: number, now: number): boolean {
  return leaseUntil <= now;
}

/**
 * How long a live lease still protects its holder (0 once it has passed).
 */
export function leaseRemainingMs(leaseUntil: number, now: number): number {
  return Math.max(0, leaseUntil - now);
}
