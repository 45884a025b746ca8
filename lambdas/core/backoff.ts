/**
 * Exponential backoff with full jitter: a random wait in [0, ceiling), the ceiling doubling from `baseMs` per retry
 * up to `capMs`, so many callers retrying the same failure spread out. `retryIndex` is 0 for the wait before the
 * second attempt. Pure: `random` is Math.random in production, fixed in tests.
 */
export function fullJitterBackoffMs(
  retryIndex: number,
  options: { baseMs: number; capMs?: number },
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(options.capMs ?? Number.POSITIVE_INFINITY, options.baseMs * 2 ** Math.min(retryIndex, 30));
  return Math.floor(random() * ceiling);
}
