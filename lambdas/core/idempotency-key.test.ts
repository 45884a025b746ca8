import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCode, InvalidIdempotencyKeyError, InvalidTenantError } from './errors';
import { hashForLog, keyForEcho, TENANT_MIN_LENGTH, validateIdempotencyKey, validateTenantId, validateToolName } from './idempotency-key';

const refused: [string, unknown][] = [
  ['empty', ''],
  ['7 characters', 'a'.repeat(7)],
  ['129 characters', 'a'.repeat(129)],
  ['a space', 'order 12345'],
  ['a path traversal', '../../../etc'],
  ['a slash', 'abc/defgh'],
  ['non-ASCII', 'commande-é1'],
  ['an emoji', 'order-😀-123'],
  ['a storage separator #', 'tenant#key1'],
  ['a newline', 'abcdefgh\n'],
  ['a number', 12345678],
  ['null', null],
  ['undefined', undefined],
  ['an object', { key: 'abcdefgh' }],
];

describe('idempotency keys', () => {
  it.each(refused)('refuses %s with INVALID_IDEMPOTENCY_KEY', (_, key) => {
    expect(() => validateIdempotencyKey(key)).toThrow(InvalidIdempotencyKeyError);
    try {
      validateIdempotencyKey(key);
    } catch (err) {
      expect((err as InvalidIdempotencyKeyError).code).toBe(ErrorCode.INVALID_IDEMPOTENCY_KEY);
      // The message says what is wrong without echoing the key.
      if (typeof key === 'string' && key.length > 0) expect((err as Error).message).not.toContain(key);
    }
  });

  it('accepts 8 and 128 characters, and every allowed character', () => {
    expect(validateIdempotencyKey('a'.repeat(8))).toBe('a'.repeat(8));
    expect(validateIdempotencyKey('a'.repeat(128))).toBe('a'.repeat(128));
    expect(validateIdempotencyKey('AZaz09._:-')).toBe('AZaz09._:-');
  });

  it('accepts exactly the keys of 8 to 128 characters from A-Z a-z 0-9 . _ : -', () => {
    const allowed = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-';
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...allowed), minLength: 8, maxLength: 128 }), (key) => {
        expect(validateIdempotencyKey(key)).toBe(key);
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 140, unit: 'binary' }), (key) => {
        const valid = key.length >= 8 && key.length <= 128 && [...key].every((c) => allowed.includes(c));
        if (valid) expect(validateIdempotencyKey(key)).toBe(key);
        else expect(() => validateIdempotencyKey(key)).toThrow(InvalidIdempotencyKeyError);
      }),
    );
  });
});

describe('tenant ids', () => {
  // Same charset and maximum as keys; the minimum is TENANT_MIN_LENGTH, since issuers assign names like `demo`.
  it.each(refused.filter(([what]) => what !== '7 characters'))('refuses %s with INVALID_TENANT, by the same rules as keys', (_, tenant) => {
    expect(() => validateTenantId(tenant)).toThrow(InvalidTenantError);
  });

  it(`accepts ${TENANT_MIN_LENGTH} to 128 characters, refuses shorter`, () => {
    expect(validateTenantId('d'.repeat(TENANT_MIN_LENGTH))).toBe('d'.repeat(TENANT_MIN_LENGTH));
    expect(validateTenantId('demo')).toBe('demo');
    expect(validateTenantId('t'.repeat(128))).toBe('t'.repeat(128));
    expect(() => validateTenantId('d'.repeat(TENANT_MIN_LENGTH - 1))).toThrow(InvalidTenantError);
  });
});

describe('hashForLog', () => {
  it('is short, stable and does not contain the key', () => {
    const key = 'order-2030-01-01-abcdef';
    expect(hashForLog(key)).toBe(hashForLog(key));
    expect(hashForLog(key)).toMatch(/^[0-9a-f]{12}$/);
    expect(hashForLog(key)).not.toBe(hashForLog(`${key}x`));
    expect(hashForLog(key)).not.toContain('order');
  });
});

describe('keyForEcho', () => {
  it('echoes a well-formed key in full and any other string only as its head and length', () => {
    expect(keyForEcho('order-2030-01-01-abcdef')).toBe('order-2030-01-01-abcdef');
    expect(keyForEcho('x'.repeat(1_000_000))).toBe(`${'x'.repeat(16)}… (1000000 characters)`);
    expect(keyForEcho('has spaces in it, and more')).toBe('has spaces in it… (26 characters)');
    expect(keyForEcho('short')).toBe('short');
  });
});

describe('tool names', () => {
  it("accept MCP's tool-name charset, case-sensitive", () => {
    for (const name of ['create_order', 'createOrder', 'orders.create', 'orders-v2.create_one', 'A', 'x'.repeat(128)]) {
      expect(validateToolName(name)).toBe(name);
    }
  });

  it('refuse what could break a storage key or an operation id, with a clear message', () => {
    for (const name of ['', 'x'.repeat(129), 'a#b', 'with space', 'a\nb', 'a/b', 'ä']) {
      expect(() => validateToolName(name)).toThrow(/tool name must be 1 to 128 of A-Z a-z 0-9 _ - \./);
    }
  });
});
