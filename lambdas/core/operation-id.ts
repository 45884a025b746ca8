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
 * Mints and checks operation ids; both reject with an `IdempotencyError` of `code` TRANSIENT_FAILURE (a retry may
 * succeed) while the key cannot be read. An id is
 * bound to a tenant and a tool; `expiresAt` is in epoch seconds. Checking answers valid, expired (authentic, but past
 * its expiry: it still names an operation that may have run), or unknown (not minted by us for this tenant and tool:
 * malformed, forged, or bound elsewhere, indistinguishable on purpose).
 *
 * @public
 */
export interface OperationIdSigner {
  /**
   * A new operation id for the tenant and tool, expiring after `ttlSeconds` (the toolkit's signer: 3600 when unset);
   * `expiresAt` in epoch seconds.
   */
  issue(binding: { tenant: string; tool: string }, ttlSeconds?: number): Promise<{ operationId: string; expiresAt: number }>;
  /** Checks `value` (untrusted) as an operation id for the tenant and tool; never throws for a bad id, answers `unknown`. */
  verify(
    binding: { tenant: string; tool: string },
    value: unknown,
  ): Promise<
    { valid: true; expiresAt: number } | { valid: false; reason: 'expired'; expiresAt: number } | { valid: false; reason: 'unknown' }
  >;
}

/** What an operation id is bound to: the tenant and the tool. */
type OperationIdBinding = Parameters<OperationIdSigner['issue']>[0];
/** A server-issued operation id and when it expires (epoch seconds). */
type IssuedOperationId = Awaited<ReturnType<OperationIdSigner['issue']>>;
/** What checking an operation id answers: valid, expired, or not ours. */
type OperationIdCheck = Awaited<ReturnType<OperationIdSigner['verify']>>;

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
