import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * Fields that describe the call, not the business operation: they never change the fingerprint.
 */
export const DEFAULT_NON_BUSINESS_FIELDS: readonly string[] = ['trace_id', 'request_id', 'requested_at'];

/** The identity fields are not arguments of the operation either: they name it. */
const IDENTITY_FIELDS = ['idempotency_key', 'operation_id'];

export function businessArguments(
  args: Record<string, unknown>,
  nonBusinessFields: readonly string[] = DEFAULT_NON_BUSINESS_FIELDS,
): Record<string, unknown> {
  const excluded = new Set([...IDENTITY_FIELDS, ...nonBusinessFields]);
  // fromEntries defines own properties: plain assignment would turn an argument named "__proto__" (which
  // JSON.parse creates as an ordinary key) into a prototype and drop it from the fingerprint.
  return Object.fromEntries(Object.entries(args).filter(([name, value]) => !excluded.has(name) && value !== undefined));
}

/**
 * RFC 8785 (JCS) canonical JSON: the same arguments in any key order give the same text.
 */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be represented as JSON');
  return text;
}

/**
 * SHA-256 of the canonical business arguments, hex.
 *
 * @public
 */
export function fingerprint(args: Record<string, unknown>, nonBusinessFields: readonly string[] = DEFAULT_NON_BUSINESS_FIELDS): string {
  return createHash('sha256')
    .update(canonicalJson(businessArguments(args, nonBusinessFields)))
    .digest('hex');
}
