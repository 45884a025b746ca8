import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Server-minted operation ids: `op_<expiry>.<nonce>.<mac>`, an HMAC-SHA256 over tenant, tool, expiry and nonce.
 * High-risk tools accept only these instead of a client-chosen key, so a key cannot be guessed, shared between
 * tenants or moved to another tool. Pure apart from the random nonce: the secret and the clock are passed in.
 * The format stays within the idempotency-key charset (A-Za-z0-9._:-) and length (77 characters).
 */
const PREFIX = 'op_';
const VERSION = 'v1';
const FORMAT = /^op_([0-9a-z]{1,11})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
export const DEFAULT_OPERATION_ID_TTL_SECONDS = 3600;

export interface OperationIdBinding {
  tenant: string;
  tool: string;
}

export interface IssuedOperationId {
  operationId: string;
  /** Epoch seconds. */
  expiresAt: number;
}

export type OperationIdCheck =
  | { valid: true; expiresAt: number }
  /** Authentic, but past its expiry: still names an operation that may have run. */
  | { valid: false; reason: 'expired'; expiresAt: number }
  /** Not minted by us for this tenant and tool (malformed, forged, or bound elsewhere): indistinguishable on purpose. */
  | { valid: false; reason: 'unknown' };

function mac(secret: string, binding: OperationIdBinding, expiry: string, nonce: string): Buffer {
  // Tenants and tools cannot contain '\n', so the fields cannot run into each other.
  return createHmac('sha256', secret).update([VERSION, binding.tenant, binding.tool, expiry, nonce].join('\n')).digest();
}

export function issueOperationId(
  secret: string,
  binding: OperationIdBinding,
  nowMs: number,
  ttlSeconds = DEFAULT_OPERATION_ID_TTL_SECONDS,
): IssuedOperationId {
  const expiresAt = Math.floor(nowMs / 1000) + ttlSeconds;
  const expiry = expiresAt.toString(36);
  const nonce = randomBytes(16).toString('base64url');
  const signature = mac(secret, binding, expiry, nonce).toString('base64url');
  return { operationId: `${PREFIX}${expiry}.${nonce}.${signature}`, expiresAt };
}

export function verifyOperationId(secret: string, binding: OperationIdBinding, value: unknown, nowMs: number): OperationIdCheck {
  if (typeof value !== 'string') return { valid: false, reason: 'unknown' };
  const match = FORMAT.exec(value);
  if (!match) return { valid: false, reason: 'unknown' };
  const [, expiry, nonce, signature] = match as unknown as [string, string, string, string];
  // Compared as text: base64url has spare bits in its last character, and a second spelling of one id would be
  // a second idempotency key for the same operation.
  const expected = Buffer.from(mac(secret, binding, expiry, nonce).toString('base64url'));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { valid: false, reason: 'unknown' };
  const expiresAt = parseInt(expiry, 36);
  if (expiresAt * 1000 <= nowMs) return { valid: false, reason: 'expired', expiresAt };
  return { valid: true, expiresAt };
}
