import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The `requestState` of a confirmation round (MCP 2026-07-28 input requests): `cf1.<expiry>.<nonce>.<mac>`, an
 * HMAC-SHA256 over tenant, tool, key and the arguments' fingerprint, so the person's "yes" to one operation can
 * never run another: not another tenant's, another tool's, another key's, nor the same key with other arguments.
 * The state round-trips through the client, which may forge or replay it. Pure apart from the random nonce: the
 * secret (the operation-id key, domain-separated by the version tag) and the clock are passed in.
 */
const VERSION = 'confirm-v1';
const FORMAT = /^cf1\.([0-9a-z]{1,11})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
/** Long enough for a person to read and answer, short enough that a forgotten prompt cannot be answered days later. */
export const DEFAULT_CONFIRMATION_TTL_SECONDS = 600;

export interface ConfirmationBinding {
  tenant: string;
  tool: string;
  idempotencyKey: string;
  /** The fingerprint of the business arguments the person is asked about (core/fingerprint.ts). */
  fingerprint: string;
}

export type ConfirmationStateCheck =
  | { valid: true }
  /** Authentic and for this operation, but the person's answer came too late. */
  | { valid: false; reason: 'expired' }
  /** Malformed, forged, or minted for another tenant, tool, key or arguments: indistinguishable on purpose. */
  | { valid: false; reason: 'unknown' };

function mac(secret: string, binding: ConfirmationBinding, expiry: string, nonce: string): string {
  // None of the fields can contain '\n' (tenants, tools and keys have their charsets; fingerprints are hex).
  const fields = [VERSION, binding.tenant, binding.tool, binding.idempotencyKey, binding.fingerprint, expiry, nonce];
  return createHmac('sha256', secret).update(fields.join('\n')).digest('base64url');
}

export function mintConfirmationState(
  secret: string,
  binding: ConfirmationBinding,
  nowMs: number,
  ttlSeconds = DEFAULT_CONFIRMATION_TTL_SECONDS,
): string {
  const expiry = (Math.floor(nowMs / 1000) + ttlSeconds).toString(36);
  const nonce = randomBytes(16).toString('base64url');
  return `cf1.${expiry}.${nonce}.${mac(secret, binding, expiry, nonce)}`;
}

export function verifyConfirmationState(secret: string, binding: ConfirmationBinding, value: unknown, nowMs: number): ConfirmationStateCheck {
  if (typeof value !== 'string') return { valid: false, reason: 'unknown' };
  const match = FORMAT.exec(value);
  if (!match) return { valid: false, reason: 'unknown' };
  const [, expiry, nonce, signature] = match as unknown as [string, string, string, string];
  const expected = Buffer.from(mac(secret, binding, expiry, nonce));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { valid: false, reason: 'unknown' };
  if (parseInt(expiry, 36) * 1000 <= nowMs) return { valid: false, reason: 'expired' };
  return { valid: true };
}
