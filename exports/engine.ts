/**
 * `idempotent-mcp/engine`: the engine, the store ports it runs on (no AWS types) and what they carry, the in-memory
 * stores, the errors a tool throws and the three a store of your own throws (the port's own vocabulary). Nothing here does I/O of its own. Key rules, the fingerprint, the transition
 * table and the storage-key layout are internal.
 */
export type { Clock } from '../lambdas/core/clock';
export {
  ErrorCode,
  IdempotencyError,
  OwnershipLostError,
  StoreUnavailableError,
  TransactionRejectedError,
  TerminalToolError,
  TransientToolError,
  UncertainToolError,
  type ToolFailure,
} from '../lambdas/core/errors';
export { validateIdempotencyKey } from '../lambdas/core/idempotency-key';
export type { AbsentPolicy, ReconcileFinding, ReconcileRequest } from '../lambdas/core/reconcile';
export type { WriteToolResult } from '../lambdas/core/result-contract';
export type { IdempotencyRecord, ReviewEntry, StoredError } from '../lambdas/core/state-machine';
export type { IdempotencyPolicy, ToolEffect } from '../lambdas/core/tool-policy';
export { IdempotencyEngine, type EngineOptions } from '../lambdas/engine/engine';
export type { Execution, ExecutionContext, Executor, WriteRequest, NeedsConfirmation } from '../lambdas/engine/write-request';
export type { ConfirmationPorts, ConfirmationRequirement } from '../lambdas/confirmation/gate';
export type { EngineEvent, IdempotencyObserver } from '../lambdas/engine/observer';
export type {
  ExtraWrite,
  IdempotencyStore,
  OperatorDecision,
  Reconciliation,
  RecordIdentity,
  RecordQueries,
  RecordMemos,
  ReviewLog,
  ReviewStore,
} from '../lambdas/engine/persistence';
export { InMemoryIdempotencyStore } from '../lambdas/engine/in-memory-store';
export type { ApprovalRecord } from '../lambdas/confirmation/core/approval';
export type { ApprovalStore } from '../lambdas/confirmation/approval-store';
export { InMemoryApprovalStore } from '../lambdas/confirmation/in-memory-approval-store';
export type { ConfirmationBinding } from '../lambdas/confirmation/core/round-state';
