/**
 * Error codes are part of the public result contract: agents branch on them, so they never change meaning.
 * @public
 */
export const ErrorCode = {
  INVALID_ARGUMENTS: 'INVALID_ARGUMENTS',
  INVALID_IDEMPOTENCY_KEY: 'INVALID_IDEMPOTENCY_KEY',
  INVALID_TENANT: 'INVALID_TENANT',
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
  OPERATION_IN_PROGRESS: 'OPERATION_IN_PROGRESS',
  OUTCOME_UNKNOWN: 'OUTCOME_UNKNOWN',
  REVIEW_REQUIRED: 'REVIEW_REQUIRED',
  /** Verified not to have happened (by the downstream or a person), for a tool that is not run again with this key. */
  NOT_EXECUTED: 'NOT_EXECUTED',
  UNKNOWN_OPERATION_ID: 'UNKNOWN_OPERATION_ID',
  /** The person said no (or dismissed the prompt): nothing ran, nothing is recorded, the key stays free. */
  CONFIRMATION_DECLINED: 'CONFIRMATION_DECLINED',
  /**
   * Nothing ran yet: the person approves this operation on the approval page first. The answer carries the link
   * (`approval_url`); show it to the person, then call again with the same key. A retry before they decide gets the
   * same link; after their yes the call runs once; after their no, CONFIRMATION_DECLINED.
   */
  APPROVAL_REQUIRED: 'APPROVAL_REQUIRED',
  /** The tool needs the person's confirmation and this client cannot ask for it (a 2025-era client). */
  CONFIRMATION_UNAVAILABLE: 'CONFIRMATION_UNAVAILABLE',
  /** The confirmation's requestState is forged, expired or for other arguments: nothing ran; call again to be asked anew. */
  CONFIRMATION_INVALID: 'CONFIRMATION_INVALID',
  RESULT_TOO_LARGE: 'RESULT_TOO_LARGE',
  TRANSIENT_FAILURE: 'TRANSIENT_FAILURE',
  STORE_UNAVAILABLE: 'STORE_UNAVAILABLE',
  NOT_FOUND: 'NOT_FOUND',
  /** On your own server, a call whose `tenant` function found none (the endpoint answers a refused token with HTTP 401 before any tool runs). */
  UNAUTHORIZED: 'UNAUTHORIZED',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
} as const;
/**
 * One of the `ErrorCode` values: the stable code of an error answer.
 * @public
 */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** What a failure tells us about whether the side effect happened (`ToolFailure.kind`). */
export type FailureKind = ToolFailure['kind'];

/**
 * Base of the errors a tool throws to say how its failure must be treated.
 *
 * @public
 */
export abstract class ToolFailure extends Error {
  /**
   * What the failure tells us about whether the side effect happened. `terminal`: a business rejection, nothing
   * happened and nothing will; stored as FAILED and replayed. `transient`: known not to have happened and worth
   * retrying; the key is released so a retry executes. `uncertain`: it may have happened; stored as UNKNOWN and
   * settled by the reconciler, never retried blindly.
   */
  abstract readonly kind: 'terminal' | 'transient' | 'uncertain';
  constructor(
    /** The tool's own stable code, passed to the caller as the answer's `error.code` (a terminal failure's is stored and replayed). */
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * A business rejection (card declined, unknown customer): replayed to every duplicate.
 *
 * @public
 */
export class TerminalToolError extends ToolFailure {
  /** Nothing happened and nothing will: stored as FAILED and replayed. */
  readonly kind = 'terminal' as const;
}

/**
 * The downstream refused before doing anything (503 before commit, throttled): retry with the same key.
 *
 * @public
 */
export class TransientToolError extends ToolFailure {
  /** Known not to have happened: the key is released for a retry (verified instead when an earlier attempt may still land). */
  readonly kind = 'transient' as const;
  constructor(
    code: string,
    message: string,
    /** The answer's `retry_after_ms`: how long the caller waits before calling again with the key. Default 1000 ms. */
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/**
 * The downstream may have acted (timeout after sending): the outcome must be verified, not retried.
 *
 * @public
 */
export class UncertainToolError extends ToolFailure {
  /** It may have happened: stored as UNKNOWN and settled by the reconciler, never retried blindly. */
  readonly kind = 'uncertain' as const;
}

/**
 * Unclassified errors are treated as uncertain: an unknown exception after a downstream call
 * may hide a committed effect, and a wrong "uncertain" costs a reconciliation, a wrong "transient" a duplicate.
 */
export function classifyFailure(err: unknown): FailureKind {
  return err instanceof ToolFailure ? err.kind : 'uncertain';
}

/**
 * Errors raised by the engine itself, each with the contract code it maps to.
 *
 * @public
 */
export class IdempotencyError extends Error {
  constructor(
    /** The contract code the caller gets (`WriteToolResult.error.code`). */
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class InvalidIdempotencyKeyError extends IdempotencyError {
  constructor(message: string) {
    super(ErrorCode.INVALID_IDEMPOTENCY_KEY, message);
  }
}

export class InvalidTenantError extends IdempotencyError {
  constructor(message: string) {
    super(ErrorCode.INVALID_TENANT, message);
  }
}

export class ResultTooLargeError extends IdempotencyError {
  constructor(bytes: number, limit: number) {
    super(
      ErrorCode.RESULT_TOO_LARGE,
      `the tool's result is ${bytes} bytes, over the ${limit}-byte limit of an idempotency record; return resource ids instead`,
    );
  }
}

/**
 * The record is no longer ours: the lease was taken over or the record settled while we executed. A store of your
 * own throws it when a write fenced on the owner token finds another owner or a record no longer PROCESSING (the
 * store conformance suite checks it); the engine then answers from the record as it is and never writes over it.
 *
 * @public
 */
export class OwnershipLostError extends IdempotencyError {
  constructor() {
    super(ErrorCode.OPERATION_IN_PROGRESS, 'the idempotency record is owned by another executor');
  }
}

/**
 * The store could not be reached or failed, so the write may or may not have been applied. A store of your own
 * throws it for any failure that does not prove the write was refused, so the engine never takes a lost answer for
 * a refusal.
 *
 * @public
 */
export class StoreUnavailableError extends IdempotencyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.STORE_UNAVAILABLE, message, options);
  }
}

/**
 * The tool's own writes in the completion transaction were refused (cancelled as a whole): nothing committed. A store
 * of your own throws it when an `ExtraWrite`'s condition refuses, with one reason per item of the transaction
 * (`undefined` for an item that was not the cause).
 *
 * @public
 */
export class TransactionRejectedError extends Error {
  constructor(
    /** One per item of the transaction, in order: the store's cancellation reason, `undefined` for an item that was not the cause. */
    readonly reasons: (string | undefined)[],
  ) {
    super(`the completion transaction was cancelled: ${reasons.map((r) => r ?? 'None').join(', ')}`);
    this.name = 'TransactionRejectedError';
  }
}

/**
 * The operation-id key could not be read: nothing that needs it ran, and a retry may succeed.
 */
export class SecretUnavailableError extends IdempotencyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.TRANSIENT_FAILURE, message, options);
  }
}
