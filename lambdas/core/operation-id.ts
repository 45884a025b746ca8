import { mintSignedToken, verifySignedToken } from './signed-token';

/**
 * Server-minted operation ids: `op_<expiry>.<nonce>.<mac>`, an HMAC-SHA256 over tenant, tool, expiry and nonce.
 * High-risk tools accept only these instead of a client-chosen key, so a key cannot be guessed, shared between
 * tenants or moved to another tool. Pure apart from the random nonce: the secret and the clock are passed in.
 * The format stays within the idempotency-key charset (A-Za-z0-9._:-) and length (77 characters).
 */
const PREFIX = 'op_';
const VERSION = 'v1';
export const DEFAULT_OPERATION_ID_TTL_SECONDS = 3600;

/**
 * What an operation id is bound to: the tenant and the tool.
 * @public
 */
export interface OperationIdBinding {
  tenant: string;
  tool: string;
}

/**
 * A server-issued operation id and when it expires.
 * @public
 */
export interface IssuedOperationId {
  operationId: string;
  /** Epoch seconds. */
  expiresAt: number;
}

/**
 * What checking an operation id answers: valid, expired, or not ours.
 * @public
 */
export type OperationIdCheck =
  | { valid: true; expiresAt: number }
  /** Authentic, but past its expiry: still names an operation that may have run. */
  | { valid: false; reason: 'expired'; expiresAt: number }
  /** Not minted by us for this tenant and tool (malformed, forged, or bound elsewhere): indistinguishable on purpose. */
  | { valid: false; reason: 'unknown' };

const fields = (binding: OperationIdBinding) => [VERSION, binding.tenant, binding.tool];

export function issueOperationId(
  secret: string,
  binding: OperationIdBinding,
  nowMs: number,
  ttlSeconds = DEFAULT_OPERATION_ID_TTL_SECONDS,
): IssuedOperationId {
  const { token, expiresAt } = mintSignedToken(PREFIX, secret, fields(binding), nowMs, ttlSeconds);
  return { operationId: token, expiresAt };
}

export function verifyOperationId(secret: string, binding: OperationIdBinding, value: unknown, nowMs: number): OperationIdCheck {
  return verifySignedToken(PREFIX, secret, fields(binding), value, nowMs);
}
