import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The one format of the tokens the server mints and a client hands back (operation ids, confirmation states):
 * `<prefix><expiry>.<nonce>.<mac>`, expiry in base-36 epoch seconds, a 16-byte random nonce, and an HMAC-SHA256 over
 * the fields the token is bound to, the expiry and the nonce. Pure apart from the nonce: secret and clock are passed in.
 * Every field must be free of '\n' (tenants, tools and keys have their charsets; fingerprints are hex), so the fields
 * cannot run into each other.
 */
export type SignedTokenCheck =
  | { valid: true; expiresAt: number }
  /** Authentic and bound to these fields, but past its expiry. */
  | { valid: false; reason: 'expired'; expiresAt: number }
  /** Malformed, forged, or bound to other fields: indistinguishable on purpose. */
  | { valid: false; reason: 'unknown' };

const mac = (secret: string, fields: readonly string[], expiry: string, nonce: string): string =>
  createHmac('sha256', secret)
    .update([...fields, expiry, nonce].join('\n'))
    .digest('base64url');

/** `fields` starts with the token kind's version tag, which also separates the kinds sharing one secret. */
export function mintSignedToken(prefix: string, secret: string, fields: readonly string[], nowMs: number, ttlSeconds: number) {
  const expiresAt = Math.floor(nowMs / 1000) + ttlSeconds;
  const expiry = expiresAt.toString(36);
  const nonce = randomBytes(16).toString('base64url');
  return { token: `${prefix}${expiry}.${nonce}.${mac(secret, fields, expiry, nonce)}`, expiresAt };
}

export function verifySignedToken(
  prefix: string,
  secret: string,
  fields: readonly string[],
  value: unknown,
  nowMs: number,
): SignedTokenCheck {
  if (typeof value !== 'string' || !value.startsWith(prefix)) return { valid: false, reason: 'unknown' };
  const match = /^([0-9a-z]{1,11})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value.slice(prefix.length));
  if (!match) return { valid: false, reason: 'unknown' };
  const [, expiry, nonce, signature] = match as unknown as [string, string, string, string];
  // Compared as text: base64url has spare bits in its last character, and a second spelling of one token would be,
  // for an operation id, a second idempotency key for the same operation.
  const expected = Buffer.from(mac(secret, fields, expiry, nonce));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { valid: false, reason: 'unknown' };
  const expiresAt = parseInt(expiry, 36);
  if (expiresAt * 1000 <= nowMs) return { valid: false, reason: 'expired', expiresAt };
  return { valid: true, expiresAt };
}
