import { describe, expect, it } from 'vitest';
import { mintConfirmationState, verifyConfirmationState } from './round-state';
import { fingerprint } from '../../core/fingerprint';
import { issueOperationId, verifyOperationId } from '../../core/operation-id';

const SECRET = 's'.repeat(32);
const NOW = Date.UTC(2026, 0, 1);
const binding = { tenant: 'tenant-a', tool: 'request_payment', idempotencyKey: 'op_key', fingerprint: fingerprint({ amount_minor: 1250 }) };

describe('confirmation requestState', () => {
  it('verifies what was minted, until it expires', () => {
    const state = mintConfirmationState(SECRET, binding, NOW, 600);
    expect(verifyConfirmationState(SECRET, binding, state, NOW)).toEqual({ valid: true });
    expect(verifyConfirmationState(SECRET, binding, state, NOW + 599_000)).toEqual({ valid: true });
    expect(verifyConfirmationState(SECRET, binding, state, NOW + 600_000)).toEqual({ valid: false, reason: 'expired' });
  });

  it('is bound to tenant, tool, key, the arguments and the secret', () => {
    const state = mintConfirmationState(SECRET, binding, NOW);
    for (const other of [
      { ...binding, tenant: 'tenant-b' },
      { ...binding, tool: 'send_email' },
      { ...binding, idempotencyKey: 'op_other' },
      { ...binding, fingerprint: fingerprint({ amount_minor: 125_000 }) },
    ])
      expect(verifyConfirmationState(SECRET, other, state, NOW)).toEqual({ valid: false, reason: 'unknown' });
    expect(verifyConfirmationState('t'.repeat(32), binding, state, NOW)).toEqual({ valid: false, reason: 'unknown' });
  });

  it('refuses anything else, and is no operation id (one key, two purposes, no crossover)', () => {
    for (const junk of [undefined, 42, '', 'cf1', `${mintConfirmationState(SECRET, binding, NOW)}x`])
      expect(verifyConfirmationState(SECRET, binding, junk, NOW)).toEqual({ valid: false, reason: 'unknown' });
    const { operationId } = issueOperationId(SECRET, { tenant: binding.tenant, tool: binding.tool }, NOW);
    expect(verifyConfirmationState(SECRET, binding, operationId, NOW)).toEqual({ valid: false, reason: 'unknown' });
    expect(
      verifyOperationId(SECRET, { tenant: binding.tenant, tool: binding.tool }, mintConfirmationState(SECRET, binding, NOW), NOW),
    ).toEqual({
      valid: false,
      reason: 'unknown',
    });
  });
});
