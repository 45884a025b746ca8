import { describe, expect, it } from 'vitest';
import { leaseHasPassed, leaseRemainingMs } from './lease';

describe('the lease rule', () => {
  it('protects its holder before its end only: at the end instant another may take over', () => {
    expect(leaseHasPassed(1000, 999)).toBe(false);
    expect(leaseHasPassed(1000, 1000)).toBe(true);
    expect(leaseHasPassed(1000, 1001)).toBe(true);
  });

  it('tells how long a live lease still protects its holder, and 0 once passed', () => {
    expect(leaseRemainingMs(1000, 400)).toBe(600);
    expect(leaseRemainingMs(1000, 1000)).toBe(0);
    expect(leaseRemainingMs(1000, 5000)).toBe(0);
  });
});
