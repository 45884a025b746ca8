import type { Clock } from '../core/clock';
import { type ConfirmationBinding, type ConfirmationStateCheck, mintConfirmationState, verifyConfirmationState } from './core/round-state';

/**
 * Signs and checks the round tokens (`requestState`) of confirmations, with the operation-id key (domain-separated).
 *
 * @public
 */
export interface ConfirmationSigner {
  mint(binding: ConfirmationBinding, ttlSeconds?: number): Promise<string>;
  verify(binding: ConfirmationBinding, value: unknown): Promise<ConfirmationStateCheck>;
}

/** The round signer over the HMAC key, read when first needed (the operation ids' key: the version tag separates them). */
export function createConfirmationSigner(secret: () => Promise<string>, clock: Clock): ConfirmationSigner {
  return {
    mint: async (binding, ttlSeconds) => mintConfirmationState(await secret(), binding, clock(), ttlSeconds),
    verify: async (binding, value) => verifyConfirmationState(await secret(), binding, value, clock()),
  };
}
