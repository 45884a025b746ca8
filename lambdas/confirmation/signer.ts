import type { Clock } from '../core/clock';
import { type ConfirmationSigner, mintConfirmationState, verifyConfirmationState } from './core/round-state';

export type { ConfirmationSigner };

/** The round signer over the HMAC key, read when first needed (the operation ids' key: the version tag separates them). */
export function createConfirmationSigner(secret: () => Promise<string>, clock: Clock): ConfirmationSigner {
  return {
    mint: async (binding, ttlSeconds) => mintConfirmationState(await secret(), binding, clock(), ttlSeconds),
    verify: async (binding, value) => verifyConfirmationState(await secret(), binding, value, clock()),
  };
}
