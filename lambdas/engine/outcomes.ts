import type { Clock } from '../core/clock';
import {
  type classifyFailure,
  ErrorCode,
  OwnershipLostError,
  type ResultTooLargeError,
  ToolFailure,
  TransientToolError,
} from '../core/errors';
import { decidableAt, inFlightUntil, unknownRetryAfterMs } from '../core/in-flight';
import type { IdempotencyPolicy } from '../core/tool-policy';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import { isSettled, transition, type IdempotencyRecord, type StoredError } from '../core/state-machine';
import type { EngineEventType } from './observer';
import type { IdempotencyStore } from './persistence';

/**
 * What an execution came to, recorded on the key's record with fenced writes (failed, released, UNKNOWN), and the
 * answers read back from the record when a write of ours was refused. The engine (engine.ts) decides when; these
 * only record and answer.
 */

/** A tool's settings as one run uses them: every default applied, the window resolved (`toolInFlightWindowMs`). */
export type ResolvedPolicy = Required<IdempotencyPolicy>;

/** Records an engine event for this call (the observer), and remembers local keys answered from a settled record. */
export type Emit = (type: EngineEventType, errorCode?: string) => void;

/** What an execution's failure is answered with depends on: whether it took over a stale one, the tool's settings. */
export interface AfterExecution {
  takenOver: boolean;
  policy: ResolvedPolicy;
  local: boolean;
}

/** The execution ran out of its budget: its outcome is unknown (the downstream may have acted). */
export class DeadlineExceeded extends Error {
  constructor(ms: number) {
    super(`execution exceeded its ${ms} ms budget`);
    this.name = 'DeadlineExceeded';
  }
}

/** Records what an execution came to on the key's record, and answers from the record (one per engine). */
export class Outcomes {
  /** Claims whose store said an earlier attempt's answer was lost (`ClaimResult.answerLost`). */
  readonly lostClaimAnswers = new WeakSet<IdempotencyRecord>();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly clock: Clock,
    private readonly unknownRetryAfterMs: number,
  ) {}

  /** The tool ran (its downstream may have acted) but its outcome cannot be kept: verify it, never re-run blindly. */
  async refuseTooLarge<R>(
    record: IdempotencyRecord,
    tooLarge: ResultTooLargeError,
    emit: Emit,
    policy: ResolvedPolicy,
  ): Promise<WriteToolResult<R>> {
    const marked = await this.markUnknownOrRead(
      record,
      { code: tooLarge.code, message: tooLarge.message },
      'result_too_large',
      policy.inFlightWindowMs,
    );
    emit('unknown', tooLarge.code);
    const retryAfterMs = 'retryAfterMs' in marked ? marked.retryAfterMs : this.unknownRetryAfterMs;
    return {
      ...WriteResults.unknown(record.idempotencyKey, retryAfterMs, tooLarge.message),
      error: { code: tooLarge.code, message: tooLarge.message },
    };
  }

  async onExecutionFailure<R>(
    record: IdempotencyRecord,
    kind: ReturnType<typeof classifyFailure>,
    err: unknown,
    emit: Emit,
    after: AfterExecution,
  ): Promise<WriteToolResult<R>> {
    const key = record.idempotencyKey;
    const error = toStoredError(err);
    const { takenOver, policy } = after;
    try {
      switch (kind) {
        case 'terminal':
          transition('PROCESSING', 'fail');
          await this.store.settle(record, record.ownerToken, { status: 'FAILED', error, errorType: 'terminal' }, this.clock());
          emit('failed', error.code);
          return WriteResults.failed(key, error);
        case 'transient': {
          // Our claim was sent more than once and an earlier attempt may still land: releasing the key now could let
          // it recreate the record after a "nothing ran" answer. Recorded as UNKNOWN instead (the reconciler frees it).
          // After a takeover, the stale execution's request may have landed, or may still land within the window:
          // this call knows only that its own request did not act. Releasing would answer "nothing ran" to the next
          // call while the effect may exist; it is verified as any uncertain outcome (a local tool's stale execution
          // sent nothing: its writes commit only with its fenced settlement).
          if (this.lostClaimAnswers.has(record) || (takenOver && !after.local))
            return await this.onExecutionFailure(record, 'uncertain', err, emit, after);
          transition('PROCESSING', 'release');
          const retryAfter = err instanceof TransientToolError && err.retryAfterMs !== undefined ? err.retryAfterMs : 1000;
          // A local tool taken over: its stale run's writes never committed, but this answer cannot vouch for it.
          const released = takenOver
            ? WriteResults.unknown(key, retryAfter, TAKEN_OVER_NOT_FINISHED)
            : WriteResults.transientFailure(key, error, retryAfter);
          if (!(await this.store.release(record, record.ownerToken))) {
            // Gone means our delete was applied and its answer lost; otherwise the record moved on without us.
            return this.answerAfterLostFence<R>(record, emit, released);
          }
          emit('released', error.code);
          return released;
        }
        case 'uncertain': {
          const marked = await this.markUnknownOrRead(record, error, 'uncertain', policy.inFlightWindowMs);
          if ('moved' in marked) return this.answerFromRecord<R>(marked.moved, record, emit);
          emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
          return WriteResults.unknown(key, marked.retryAfterMs);
        }
      }
    } catch (storeErr) {
      if (storeErr instanceof OwnershipLostError) return this.answerAfterLostFence<R>(record, emit);
      // The record stays PROCESSING until its lease passes; then it is treated as UNKNOWN. Never a blind retry.
      emit('unknown', ErrorCode.STORE_UNAVAILABLE);
      return WriteResults.unknown(key, this.unknownRetryAfterMs);
    }
  }

  /**
   * Best effort PROCESSING -> UNKNOWN; `moved`: the record had moved on. Checked at once (the downstream may already
   * show the effect: found settles it), but an absence decides nothing until the window has passed: this execution
   * has stopped, so its requests were all sent by now, and one may still land until `now` + the window.
   */
  async markUnknownOrRead(
    record: IdempotencyRecord,
    error: StoredError,
    errorType: IdempotencyRecord['errorType'],
    windowMs: number,
  ): Promise<{ moved: IdempotencyRecord | undefined } | { retryAfterMs: number }> {
    const now = this.clock();
    const until = inFlightUntil(now, windowMs);
    const marked = { retryAfterMs: unknownRetryAfterMs(until, now, this.unknownRetryAfterMs) };
    try {
      if (await this.store.markUnknown(record, record.ownerToken, { error, errorType, nextCheckAt: now, inFlightUntil: until }, now))
        return marked;
      const current = await this.store.get(record);
      return current?.status === 'UNKNOWN' && current.ownerToken === record.ownerToken ? marked : { moved: current };
    } catch {
      // Left PROCESSING: after its lease it is treated as UNKNOWN, its window counted from the lease's end.
      return { retryAfterMs: unknownRetryAfterMs(inFlightUntil(record.leaseExpiresAt, windowMs), now, this.unknownRetryAfterMs) };
    }
  }

  /** An `unknown` answer's wait for a record found UNKNOWN: until its next check and the window's end, plus a period. */
  retryAfterUnknown(record: IdempotencyRecord, windowMs: number, now: number): number {
    return unknownRetryAfterMs(Math.max(record.nextCheckAt ?? now, decidableAt(record, windowMs)), now, this.unknownRetryAfterMs);
  }

  /** A fenced write of ours was refused: answer from the record as it is now (after execution: never "nothing ran"). */
  async answerAfterLostFence<R>(record: IdempotencyRecord, emit: Emit, whenGone?: WriteToolResult<R>): Promise<WriteToolResult<R>> {
    let current: IdempotencyRecord | undefined;
    try {
      current = await this.store.get(record);
    } catch {
      emit('unknown', ErrorCode.STORE_UNAVAILABLE);
      return WriteResults.unknown(record.idempotencyKey, this.unknownRetryAfterMs);
    }
    if (!current && whenGone) return whenGone;
    if (current?.ownerToken !== record.ownerToken) emit('ownership_lost');
    return this.answerFromRecord<R>(current, record, emit);
  }

  /**
   * What the record says now. Our own owner token on a settled record means our write was applied and its answer
   * lost (the SDK retried it and the retry found the fence closed): that is this call's execution, not a replay.
   */
  answerFromRecord<R>(current: IdempotencyRecord | undefined, ours: IdempotencyRecord, emit: Emit): WriteToolResult<R> {
    const key = ours.idempotencyKey;
    if (current && isSettled(current.status)) {
      if (current.ownerToken !== ours.ownerToken) {
        // Another call's record for this key: a replay only for the same arguments (the key may have been released
        // and reused with others while this call was fenced out), as for any duplicate.
        if (current.fingerprint !== ours.fingerprint) {
          emit('conflict', ErrorCode.IDEMPOTENCY_KEY_REUSED);
          return WriteResults.conflict(key);
        }
        return replayOf<R>(current);
      }
      if (current.status === 'SUCCEEDED') {
        emit('executed');
        return WriteResults.succeeded(key, current.result as R);
      }
      emit('failed', current.error?.code);
      return WriteResults.failed(key, storedErrorOf(current));
    }
    if (current?.status === 'PROCESSING') {
      emit('in_progress', ErrorCode.OPERATION_IN_PROGRESS);
      return WriteResults.inProgress(key, Math.max(100, Math.min(current.leaseExpiresAt - this.clock(), 1000)));
    }
    if (current?.status === 'NEEDS_REVIEW') {
      emit('review_required', ErrorCode.REVIEW_REQUIRED);
      return WriteResults.reviewRequired(key);
    }
    emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
    return WriteResults.unknown(key, this.unknownRetryAfterMs);
  }
}

const TAKEN_OVER_NOT_FINISHED =
  'An earlier attempt with this key did not finish, and this one could not either; call again with the same key, never with a new one.';

export function storedErrorOf(record: IdempotencyRecord): StoredError {
  return record.error ?? { code: ErrorCode.INTERNAL_ERROR, message: 'the operation failed' };
}

/** A duplicate's answer: the stored outcome, marked as a replay with the first execution's time. */
export function replayOf<R>(record: IdempotencyRecord): WriteToolResult<R> {
  const replay = { firstExecutedAt: record.createdAt };
  return record.status === 'SUCCEEDED'
    ? WriteResults.succeeded(record.idempotencyKey, record.result as R, replay)
    : WriteResults.failed(record.idempotencyKey, storedErrorOf(record), replay);
}

export function toStoredError(err: unknown): StoredError {
  if (err instanceof DeadlineExceeded) return { code: ErrorCode.OUTCOME_UNKNOWN, message: err.message };
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : ErrorCode.INTERNAL_ERROR;
  // Unclassified errors may carry internals; only a tool's own classified errors pass their message on.
  const message = err instanceof ToolFailure ? err.message : 'the operation failed unexpectedly';
  return { code, message };
}
