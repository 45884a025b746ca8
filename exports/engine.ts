/**
 * `idempotent-mcp/engine`: the engine, the store ports (no AWS types), in-memory stores, and the pure rules a tool or
 * a store adapter needs (key and tenant rules, fingerprint, the record and its settled states, errors, the clock).
 * Nothing here does I/O of its own. The transition table and the storage-key layout are internal.
 */
export { systemClock, type Clock } from '../lambdas/core/clock';
export { closestName } from '../lambdas/core/closest-name';
export {
  ErrorCode,
  IdempotencyError,
  InvalidIdempotencyKeyError,
  InvalidTenantError,
  OwnershipLostError,
  ResultTooLargeError,
  StoreUnavailableError,
  TerminalToolError,
  TransactionRejectedError,
  TransientToolError,
  UncertainToolError,
  type FailureKind,
  type ToolFailure,
} from '../lambdas/core/errors';
export { canonicalJson, fingerprint, DEFAULT_NON_BUSINESS_FIELDS } from '../lambdas/core/fingerprint';
export {
  KEY_MAX_LENGTH,
  KEY_MIN_LENGTH,
  TOOL_NAME_PATTERN,
  hashForLog,
  validateIdempotencyKey,
  validateTenantId,
  validateToolName,
} from '../lambdas/core/idempotency-key';
export { leaseHasPassed, leaseRemainingMs } from '../lambdas/core/lease';
export type { AbsentPolicy, ReconcileFinding, ReconcileRequest } from '../lambdas/core/reconcile';
export {
  describeResult,
  type ContractError,
  type KeyField,
  type Outcome,
  type WriteResults,
  type WriteToolResult,
} from '../lambdas/core/result-contract';
export {
  IllegalTransitionError,
  isSettled,
  keyIsFree,
  type ExpiryPolicy,
  type IdempotencyRecord,
  type RecordStatus,
  type ReviewEntry,
  type RecordState,
  type TransitionEvent,
  type OperatorEvent,
  type StoredError,
} from '../lambdas/core/state-machine';
export { DEFAULT_POLICY, type IdempotencyPolicy, type ToolEffect } from '../lambdas/core/tool-policy';
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
export { silentObserver, type EngineEvent, type EngineEventType, type IdempotencyObserver } from '../lambdas/engine/observer';
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
export {
  approvalId,
  approvalState,
  parseApprovalId,
  DEFAULT_APPROVAL_TTL_SECONDS,
  MAX_APPROVAL_TTL_SECONDS,
  type ApprovalDecision,
  type ApprovalLogEntry,
  type ApprovalMode,
  type ApprovalRecord,
  type ApprovalStatus,
  type ApprovalUse,
} from '../lambdas/confirmation/core/approval';
export type { ApprovalStore, DecideResult, UseResult } from '../lambdas/confirmation/approval-store';
export { InMemoryApprovalStore } from '../lambdas/confirmation/in-memory-approval-store';
export { formatMinorUnits, isPayableCurrency, minorUnitsOf } from '../lambdas/core/money';
export { hasInvisibleCharacters, quotedText, visibleText } from '../lambdas/core/display-text';
export type { ConfirmationBinding } from '../lambdas/confirmation/core/round-state';
export type { ItemKey } from '../lambdas/core/keys';
