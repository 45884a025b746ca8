import { createHash } from 'node:crypto';
import { InvalidIdempotencyKeyError, InvalidTenantError } from './errors';

export const KEY_MIN_LENGTH = 8;
export const KEY_MAX_LENGTH = 128;
/** Printable ASCII without separators we use in storage keys ('#') or that invite path tricks ('/'). */
const KEY_CHARSET = /^[A-Za-z0-9._:-]+$/;

function checkIdentifier(value: unknown, what: string, minLength = KEY_MIN_LENGTH): string {
  if (value === undefined || value === null) return `${what} is required`;
  if (typeof value !== 'string') return `${what} must be a string`;
  if (value.length < minLength || value.length > KEY_MAX_LENGTH)
    return `${what} must be ${minLength} to ${KEY_MAX_LENGTH} characters long (got ${value.length})`;
  if (!KEY_CHARSET.test(value)) return `${what} may contain only A-Z a-z 0-9 . _ : -`;
  return '';
}

/**
 * Returns the key unchanged, or throws INVALID_IDEMPOTENCY_KEY saying what is wrong (never echoing the key).
 * @public
 */
export function validateIdempotencyKey(key: unknown): string {
  const problem = checkIdentifier(key, 'idempotency_key');
  if (problem) throw new InvalidIdempotencyKeyError(problem);
  return key as string;
}

/** How much of a refused key an answer repeats: enough to recognise it, never the whole of a huge one. */
const ECHO_HEAD_LENGTH = 16;

/**
 * A key as an answer echoes it: a well-formed key in full; any other string (it may be a megabyte, and the answer
 * carries it twice) as its first characters and its length, e.g. `xxxxxxxxxxxxxxxx… (1048000 characters)`.
 */
export function keyForEcho(key: string): string {
  if (key.length <= ECHO_HEAD_LENGTH || !checkIdentifier(key, 'key')) return key;
  return `${key.slice(0, ECHO_HEAD_LENGTH)}… (${key.length} characters)`;
}

/**
 * Tenant ids follow the key charset (they become part of the record's storage key), but not its minimum length:
 * they are assigned by the identity provider, not guessed, so short names like `demo` or `acme` are fine.
 */
export const TENANT_MIN_LENGTH = 2;
/**
 * Words a bug writes in place of a tenant (`String(undefined)`, a template of a missing claim) or that name an
 * object's own machinery: as a tenant they would merge the callers of every such bug into one tenant.
 */
const RESERVED_TENANTS: ReadonlySet<string> = new Set([
  'undefined',
  'null',
  'nan',
  'infinity',
  'true',
  'false',
  '__proto__',
  'constructor',
  'prototype',
]);
export function validateTenantId(tenant: unknown): string {
  const problem =
    checkIdentifier(tenant, 'tenant id', TENANT_MIN_LENGTH) ||
    (RESERVED_TENANTS.has((tenant as string).toLowerCase()) ? `tenant id may not be the word "${tenant as string}"` : '');
  if (problem) throw new InvalidTenantError(problem);
  return tenant as string;
}

/**
 * MCP's tool-name charset: 1 to 128 of A-Z a-z 0-9 _ - . (for example `create_order`, `createOrder`, `orders.create`),
 * case-sensitive. It has no '#' (the storage key's separator) and no '\n' (the operation id's), so a name goes
 * into both as it is.
 */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
export function validateToolName(tool: unknown): string {
  if (typeof tool !== 'string' || !TOOL_NAME_PATTERN.test(tool)) {
    throw new Error(`tool name must be 1 to 128 of A-Z a-z 0-9 _ - . (got ${JSON.stringify(String(tool).slice(0, 140))})`);
  }
  return tool;
}

/**
 * Raw keys never reach logs: a short, stable hash correlates log lines without revealing the key.
 */
export function hashForLog(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 12);
}
