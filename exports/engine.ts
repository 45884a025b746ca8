/**
 * `idempotent-mcp/engine`: the engine, the store ports it runs on (no AWS types) and what they carry, the in-memory
 * stores, and the errors a tool throws. Nothing here does I/O of its own. Key rules, the fingerprint, the transition
 * table and the storage-key layout are internal.
 */
export type { Clock } from '../lambdas/core/clock';
export {
  ErrorCode,
  IdempotencyError,
  TerminalToolError,
  TransientToolError,
  UncertainToolError,
  type FailureKind,
  type ToolFailure,
} from '../lambdas/core/errors';
export { validateIdempotencyKey } from '../lambdas/core/idempotency-key';
export type { AbsentPolicy, ReconcileFinding, ReconcileRequest } from '../lambdas/core/reconcile';
export type { ContractError, Outcome, WriteToolResult } from '../lambdas/core/result-contract';
export type {
  ExpiryPolicy,
  IdempotencyRecord,
  OperatorEvent,
  RecordState,
  RecordStatus,
  ReviewEntry,
  StoredError,
} from '../lambdas/core/state-machine';
export type { IdempotencyPolicy, ToolEffect } from '../lambdas/core/tool-policy';
export { IdempotencyEngine, type EngineOptions } from '../lambdas/engine/engine';
export type {
  Execution,
  ExecutionContext,
  ExecutionPath,
  Executor,
  WriteRequest,
  NeedsConfirmation,
  EngineAnswer,
} from '../lambdas/engine/write-request';
export type { ConfirmationAsk, ConfirmationPorts, ConfirmationRequirement } from '../lambdas/confirmation/gate';
export type { EngineEvent, EngineEventType, IdempotencyObserver } from '../lambdas/engine/observer';
export type {
  AttentionQuery,
  AttentionStatus,
  ClaimOptions,
  ClaimResult,
  CommitOnceResult,
  ExtraWrite,
  IdempotencyStore,
  OperatorDecision,
  Reconciliation,
  RecordIdentity,
  RecordQueries,
  RecordMemos,
  ReviewLog,
  ReviewStore,
  Settlement,
} from '../lambdas/engine/persistence';
export { InMemoryIdempotencyStore, type InMemoryStoreOptions } from '../lambdas/engine/in-memory-store';
export type {
  ApprovalDecision,
  ApprovalLogEntry,
  ApprovalMode,
  ApprovalRecord,
  ApprovalStatus,
  ApprovalUse,
} from '../lambdas/confirmation/core/approval';
export type { ApprovalStore, DecideResult, UseResult } from '../lambdas/confirmation/approval-store';
export { InMemoryApprovalStore } from '../lambdas/confirmation/in-memory-approval-store';
export type { ConfirmationBinding } from '../lambdas/confirmation/core/round-state';
export type { ItemKey } from '../lambdas/core/keys';
