import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { businessArguments, canonicalJson, DEFAULT_NON_BUSINESS_FIELDS, fingerprint } from './fingerprint';

/** The same JSON value with every object's keys in an order chosen by `seed` (arrays keep their order: it is data). */
function reorderKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => reorderKeys(v, seed + i));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>);
  // A seeded Fisher-Yates shuffle keeps the property reproducible from fast-check's seed.
  let state = seed >>> 0 || 1;
  for (let i = entries.length - 1; i > 0; i--) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    const j = state % (i + 1);
    [entries[i], entries[j]] = [entries[j]!, entries[i]!];
  }
  // fromEntries, not assignment: a generated "__proto__" key must stay a plain key.
  return Object.fromEntries(entries.map(([k, v]) => [k, reorderKeys(v, seed * 31 + k.length)]));
}

/** Business arguments: JSON objects whose top-level names are not reserved (identity or default trace fields). */
const reserved = new Set(['idempotency_key', 'operation_id', ...DEFAULT_NON_BUSINESS_FIELDS]);
const businessArgs = fc
  .dictionary(fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 })
  .map((args) => Object.fromEntries(Object.entries(args).filter(([k]) => !reserved.has(k))));

describe('fingerprint', () => {
  it('is a SHA-256 hex digest of the RFC 8785 canonical business arguments', () => {
    expect(fingerprint({ b: 2, a: 1 })).toMatch(/^[0-9a-f]{64}$/);
    expect(canonicalJson({ b: [2, { d: 1, c: 'x' }], a: 1.0, e: 1e21 })).toBe('{"a":1,"b":[2,{"c":"x","d":1}],"e":1e+21}');
  });

  it('ignores key order at every depth', () => {
    fc.assert(
      fc.property(businessArgs, fc.integer(), (args, seed) => {
        const reordered = reorderKeys(args, seed) as Record<string, unknown>;
        expect(fingerprint(reordered)).toBe(fingerprint(args));
      }),
    );
  });

  it('ignores the default non-business fields, whatever their values', () => {
    fc.assert(
      fc.property(businessArgs, fc.jsonValue(), fc.jsonValue(), fc.jsonValue(), (args, trace, request, at) => {
        expect(fingerprint({ ...args, trace_id: trace, request_id: request, requested_at: at })).toBe(fingerprint(args));
      }),
    );
  });

  it("ignores a tool's own non-business fields (which replace the defaults)", () => {
    const fields = ['client_note', 'ui_hint'];
    fc.assert(
      fc.property(businessArgs, fc.jsonValue(), fc.jsonValue(), (args, note, hint) => {
        const withNoise = { ...args, client_note: note, ui_hint: hint };
        expect(fingerprint(withNoise, fields)).toBe(fingerprint(args, fields));
      }),
    );
    // A tool that declares its own list declares all of them: trace_id is then business.
    expect(fingerprint({ a: 1, trace_id: 'x' }, fields)).not.toBe(fingerprint({ a: 1, trace_id: 'y' }, fields));
  });

  it('does not include the idempotency key or the operation id: they name the operation', () => {
    fc.assert(
      fc.property(businessArgs, fc.string(), fc.string(), (args, key, operationId) => {
        expect(fingerprint({ ...args, idempotency_key: key, operation_id: operationId })).toBe(fingerprint(args));
      }),
    );
  });

  it('excludes only top-level fields: a nested trace_id is business data', () => {
    expect(fingerprint({ items: [{ trace_id: 'a' }] })).not.toBe(fingerprint({ items: [{ trace_id: 'b' }] }));
  });

  it('differs when any business value differs', () => {
    fc.assert(
      fc.property(businessArgs, businessArgs, (a, b) => {
        fc.pre(canonicalJson(a) !== canonicalJson(b));
        expect(fingerprint(a)).not.toBe(fingerprint(b));
      }),
    );
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((k) => !reserved.has(k)),
        fc.jsonValue(),
        fc.jsonValue(),
        (name, x, y) => {
          fc.pre(canonicalJson(x) !== canonicalJson(y));
          expect(fingerprint({ [name]: x })).not.toBe(fingerprint({ [name]: y }));
        },
      ),
    );
  });

  it('keeps an argument named __proto__ (JSON.parse makes it an ordinary key)', () => {
    expect(fingerprint(JSON.parse('{"__proto__": {"amount": 1}}'))).not.toBe(fingerprint(JSON.parse('{"__proto__": {"amount": 2}}')));
  });

  it('treats an undefined argument as absent, as JSON does', () => {
    expect(fingerprint({ a: 1, b: undefined })).toBe(fingerprint({ a: 1 }));
    expect(businessArguments({ a: 1, b: undefined, trace_id: 't' })).toEqual({ a: 1 });
  });

  it('refuses values JSON cannot carry', () => {
    expect(() => fingerprint({ a: Number.NaN })).toThrow();
    expect(() => fingerprint({ a: Number.POSITIVE_INFINITY })).toThrow();
  });
});
