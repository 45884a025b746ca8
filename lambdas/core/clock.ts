/**
 * Milliseconds since the epoch. Injected everywhere time matters, so expiry and leases are tested without waiting.
 *
 * @public
 */
export type Clock = () => number;
export const systemClock: Clock = () => Date.now();
