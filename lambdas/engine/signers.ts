import type { Clock } from '../core/clock';
import { DEFAULT_OPERATION_ID_TTL_SECONDS, issueOperationId, type OperationIdSigner, verifyOperationId } from '../core/operation-id';
import { type ConfirmationSigner, createConfirmationSigner } from '../confirmation/signer';

export type { OperationIdSigner };

/**
 * The signers of operation ids and confirmation rounds, over one key. Here, below the MCP layer, because the engine's
 * confirmation gate (lambdas/confirmation/gate.ts) calls the round signer: a call that went from the MCP layer into
 * the engine never comes back into it.
 */

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
    confirmations: createConfirmationSigner(secret, clock),
  };
}
