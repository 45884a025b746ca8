/**
 * The agent's side of the idempotency promise: a retry-safe MCP client with a call ledger.
 * Depends only on the MCP SDK and the pure helpers of lambdas/core, never on server code.
 */
export {
  IdempotentMcpClient,
  type ApprovalLink,
  type AttemptEvent,
  type IdempotentClientOptions,
  type ReadCall,
  type WriteCall,
  type WriteCallRequest,
} from '../client/idempotent-client';
export { CallLedger, type CallIdentity, type CallLedgerOptions, type LedgerEntry } from '../client/call-ledger';
export type { RetryOptions, TransportFailure } from '../client/retry';
export type { WriteToolResult } from '../lambdas/core/result-contract';
