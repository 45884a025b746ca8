import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateIdempotencyKey } from './idempotency-key';
import { issueOperationId, verifyOperationId } from './operation-id';

const SECRET = 's'.repeat(32);
const binding = { tenant: 'tenant-a', tool: 'request_payment' };
const NOW = Date.UTC(2026, 0, 1);

describe('operation ids', () => {
  it('verify what was issued, until the expiry', () => {
    const { operationId, expiresAt } = issueOperationId(SECRET, binding, NOW, 600);
    expect(verifyOperationId(SECRET, binding, operationId, NOW)).toEqual({ valid: true, expiresAt });
    expect(verifyOperationId(SECRET, binding, operationId, NOW + 599_000)).toMatchObject({ valid: true });
    expect(verifyOperationId(SECRET, binding, operationId, NOW + 600_000)).toEqual({ valid: false, reason: 'expired', expiresAt });
  });

  it('are bound to tenant, tool and secret', () => {
    const { operationId } = issueOperationId(SECRET, binding, NOW);
    expect(verifyOperationId(SECRET, { ...binding, tenant: 'tenant-b' }, operationId, NOW)).toEqual({ valid: false, reason: 'unknown' });
    expect(verifyOperationId(SECRET, { ...binding, tool: 'send_email' }, operationId, NOW)).toEqual({ valid: false, reason: 'unknown' });
    expect(verifyOperationId('t'.repeat(32), binding, operationId, NOW)).toEqual({ valid: false, reason: 'unknown' });
  });

  it('are always valid idempotency keys, and unique', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9._:-]{2,128}$/), fc.stringMatching(/^[a-z][a-z0-9_]{0,63}$/), (tenant, tool) => {
        const { operationId } = issueOperationId(SECRET, { tenant, tool }, NOW);
        expect(validateIdempotencyKey(operationId)).toBe(operationId);
        expect(seen.has(operationId)).toBe(false);
        seen.add(operationId);
      }),
      { numRuns: 200 },
    );
  });

  it('any change to any character makes the id unknown (including non-canonical base64 spellings)', () => {
    const { operationId } = issueOperationId(SECRET, binding, NOW);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
    fc.assert(
      fc.property(fc.nat(operationId.length - 1), fc.constantFrom(...alphabet), (at, replacement) => {
        fc.pre(operationId[at] !== replacement);
        const changed = `${operationId.slice(0, at)}${replacement}${operationId.slice(at + 1)}`;
        expect(verifyOperationId(SECRET, binding, changed, NOW).valid).toBe(false);
      }),
      { numRuns: 300 },
    );
    // The last character of a 32-byte base64url value carries two spare bits: every other spelling is refused.
    const last = operationId.at(-1)!;
    const index = alphabet.indexOf(last);
    for (const sibling of [alphabet[index ^ 1], alphabet[index ^ 2], alphabet[index ^ 3]]) {
      const spelled = `${operationId.slice(0, -1)}${sibling}`;
      expect(verifyOperationId(SECRET, binding, spelled, NOW).valid).toBe(false);
    }
  });

  it('reject anything that is not one', () => {
    for (const value of [undefined, null, 42, '', 'op_', 'key-12345678', `op_zz.${'A'.repeat(22)}.${'A'.repeat(43)}`])
      expect(verifyOperationId(SECRET, binding, value, NOW)).toEqual({ valid: false, reason: 'unknown' });
  });
});
