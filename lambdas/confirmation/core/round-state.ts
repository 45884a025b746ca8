import { mintSignedToken, verifySignedToken } from '../../core/signed-token';

/**
 * The `requestState` of a confirmation round (MCP 2026-07-28 input requests): `cf1.<expiry>.<nonce>.<mac>`, an
 * HMAC-SHA256 over tenant, tool, key and the arguments' fingerprint, so the person's "yes" to one operation can
 * never run another: not another tenant's, another tool's, another key's, nor the same key with other arguments.
 * The state round-trips through the client, which may forge or replay it. Pure apart from the random nonce: the
 * secret (the operation-id key, domain-separated by the version tag) and the clock are passed in.
 */
const VERSION = 'confirm-v1';
const PREFIX = 'cf1.';
/** Long enough for a person to read and answer, short enough that a forgotten prompt cannot be answered days later. */
const DEFAULT_CONFIRMATION_TTL_SECONDS = 600;

/**
 * What a person's confirmation is bound to: the tenant, the tool, the key and the arguments' fingerprint.
 * @public
 */
export interface ConfirmationBinding {
  /** The caller's tenant, from the verified token. */
  tenant: string;
  /** The tool's name. */
  tool: string;
  /** The call's key (`idempotency_key` or `operation_id`). */
  idempotencyKey: string;
  /** The fingerprint of the business arguments the person is asked about (core/fingerprint.ts). */
  fingerprint: string;
}

/**
 * Signs and checks the round tokens (`requestState`) of confirmations, with the operation-id key (domain-separated).
 * Checking answers valid, expired (authentic and for this operation, but the person's answer came too late), or
 * unknown (malformed, forged, or minted for another tenant, tool, key or arguments: indistinguishable on purpose).
 *
 * @public
 */
export interface ConfirmationSigner {
  /** A round token (`requestState`) bound to `binding`, expiring after `ttlSeconds` (the toolkit's signer: 600 when unset). */
  mint(binding: ConfirmationBinding, ttlSeconds?: number): Promise<string>;
  /** Checks `value` (untrusted) as a round token for `binding`; never throws for a bad token, answers `unknown`. */
  verify(binding: ConfirmationBinding, value: unknown): Promise<{ valid: true } | { valid: false; reason: 'expired' | 'unknown' }>;
}

/** What checking a confirmation round's token (`requestState`) answers: valid, expired, or not ours. */
type ConfirmationStateCheck = Awaited<ReturnType<ConfirmationSigner['verify']>>;

const fields = (binding: ConfirmationBinding) => [VERSION, binding.tenant, binding.tool, binding.idempotencyKey, binding.fingerprint];

export function mintConfirmationState(
  secret: string,
  binding: ConfirmationBinding,
  nowMs: number,
  ttlSeconds = DEFAULT_CONFIRMATION_TTL_SECONDS,
): string {
  return mintSignedToken(PREFIX, secret, fields(binding), nowMs, ttlSeconds).token;
}

export function verifyConfirmationState(
  secret: string,
  binding: ConfirmationBinding,
  value: unknown,
  nowMs: number,
): ConfirmationStateCheck {
  const check = verifySignedToken(PREFIX, secret, fields(binding), value, nowMs);
  return check.valid
    ? { valid: true }
    : check.reason === 'expired'
      ? { valid: false, reason: 'expired' }
      : { valid: false, reason: 'unknown' };
}

/**
 * The state's random nonce: the id of the approval record the round was asked under (lambdas/confirmation/core/approval.ts), so
 * the server, not the state, says whether that round was answered already. Only for a state that verified.
 */
export function confirmationStateNonce(state: string): string | undefined {
  if (!state.startsWith(PREFIX)) return undefined;
  return /^[0-9a-z]{1,11}\.([A-Za-z0-9_-]{22})\.[A-Za-z0-9_-]{43}$/.exec(state.slice(PREFIX.length))?.[1];
}
