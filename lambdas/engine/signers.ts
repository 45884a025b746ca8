import type { Clock } from '../core/clock';
import {
  type ConfirmationBinding,
  type ConfirmationStateCheck,
  mintConfirmationState,
  verifyConfirmationState,
} from '../core/confirmation-state';
import {
  DEFAULT_OPERATION_ID_TTL_SECONDS,
  issueOperationId,
  type IssuedOperationId,
  type OperationIdBinding,
  type OperationIdCheck,
  verifyOperationId,
} from '../core/operation-id';

/**
 * The signers of operation ids and confirmation rounds. Here, below the MCP layer, because the engine's confirmation
 * gate calls the round signer: a call that went from the MCP layer into the engine never comes back into it.
 */

/**
 * Mints and checks operation ids; both reject with SecretUnavailableError while the key cannot be read.
 *
 * @public
 */
export interface OperationIdSigner {
  issue(binding: OperationIdBinding, ttlSeconds?: number): Promise<IssuedOperationId>;
  verify(binding: OperationIdBinding, value: unknown): Promise<OperationIdCheck>;
}

/**
 * Signs and checks the round tokens (`requestState`) of confirmations, with the operation-id key (domain-separated).
 *
 * @public
 */
export interface ConfirmationSigner {
  mint(binding: ConfirmationBinding, ttlSeconds?: number): Promise<string>;
  verify(binding: ConfirmationBinding, value: unknown): Promise<ConfirmationStateCheck>;
}

/** The signers of operation ids and confirmations, over one HMAC key (domain-separated), read when first needed. */
export function createSigners(
  secret: () => Promise<string>,
  clock: Clock,
): { operationIds: OperationIdSigner; confirmations: ConfirmationSigner } {
  return {
    operationIds: {
      issue: async (binding, ttlSeconds = DEFAULT_OPERATION_ID_TTL_SECONDS) =>
        issueOperationId(await secret(), binding, clock(), ttlSeconds),
      verify: async (binding, value) => verifyOperationId(await secret(), binding, value, clock()),
    },
    confirmations: {
      mint: async (binding, ttlSeconds) => mintConfirmationState(await secret(), binding, clock(), ttlSeconds),
      verify: async (binding, value) => verifyConfirmationState(await secret(), binding, value, clock()),
    },
  };
}
