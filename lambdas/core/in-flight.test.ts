import { describe, expect, it } from 'vitest';
import {
  absenceIsConclusive,
  DEFAULT_DOWNSTREAM_TIMEOUT_MS,
  decidableAt,
  defaultInFlightWindowMs,
  inFlightUntil,
  inFlightWindowMs,
  unknownRetryAfterMs,
} from './in-flight';
import { toolInFlightWindowMs } from './tool-policy';

describe('the in-flight window', () => {
  it('defaults to the sum of the two timeouts that end a request; a tool setting wins, 0 included', () => {
    expect(defaultInFlightWindowMs({ executionTimeoutMs: 2000, downstreamTimeoutMs: 3000 })).toBe(5000);
    expect(inFlightWindowMs({ executionTimeoutMs: 2000 }, 3000)).toBe(5000);
    expect(inFlightWindowMs({ executionTimeoutMs: 2000, inFlightWindowMs: 60_000 }, 3000)).toBe(60_000);
    expect(inFlightWindowMs({ executionTimeoutMs: 2000, inFlightWindowMs: 0 }, 3000)).toBe(0);
    // A tool's settings as declared: the engine's default execution timeout and DOWNSTREAM_TIMEOUT_MS's default.
    expect(toolInFlightWindowMs({})).toBe(10_000 + DEFAULT_DOWNSTREAM_TIMEOUT_MS);
    expect(toolInFlightWindowMs({ executionTimeoutMs: 2000 }, 1000)).toBe(3000);
  });

  it('absence is conclusive from the window end on; a record without a stored window counts it from its lease', () => {
    const until = inFlightUntil(1000, 500);
    expect(until).toBe(1500);
    expect(absenceIsConclusive(until, 1499)).toBe(false);
    expect(absenceIsConclusive(until, 1500)).toBe(true);
    expect(decidableAt({ inFlightUntil: 1500, leaseExpiresAt: 9000 }, 500)).toBe(1500);
    expect(decidableAt({ leaseExpiresAt: 9000 }, 500)).toBe(9500);
  });

  it('an unknown answer inside the window says to come back after it and one reconciler period', () => {
    expect(unknownRetryAfterMs(10_000, 4000, 500)).toBe(6500);
    expect(unknownRetryAfterMs(10_000, 12_000, 500)).toBe(500);
  });
});
