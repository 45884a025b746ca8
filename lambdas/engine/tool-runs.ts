import { fullJitterBackoffMs } from '../core/backoff';
import type { Clock } from '../core/clock';
import {
  classifyFailure,
  ErrorCode,
  OwnershipLostError,
  ResultTooLargeError,
  StoreUnavailableError,
  TransactionRejectedError,
  TransientToolError,
} from '../core/errors';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import { transition, type IdempotencyRecord } from '../core/state-machine';
import type { ExtraWrite, IdempotencyStore } from './persistence';
import {
  type AfterExecution,
  DeadlineExceeded,
  type Emit,
  type Outcomes,
  type ResolvedPolicy,
  storedErrorOf,
  toStoredError,
} from './outcomes';
import type { Execution, ExecutionPath, Executor, WriteRequest } from './write-request';

/**
 * Running the tool once the engine (engine.ts) let it run: within its budget, on the claimed path (claim, run,
 * settle) or the one-request path (run, then commit record and writes in one request conditioned on the key being free).
 */

/** What to do with the key once it is ours: execute (the claimed path), or record what the one-request path saw. */
export type AfterClaim<R> = (record: IdempotencyRecord, takenOver: boolean) => Promise<WriteToolResult<R>>;
type OneRequestOutcome<R> =
  | { answer: WriteToolResult<R> }
  /** The key is held: answer as a duplicate. */
  | { held: IdempotencyRecord }
  /** Not concluded in one request (nothing was committed): claim the key, then `afterClaim`. */
  | { claimFirst: AfterClaim<R> };

/** Attempts of the one-request commit that meet another transaction on the same key before taking the claimed path. */
const CONTENDED_COMMIT_ATTEMPTS = 4;
/** The other transaction settles within milliseconds: the waits between contended commits start this short. */
const CONTENDED_COMMIT_BACKOFF_BASE_MS = 10;

/** Budget: the tool's timeout, cut to what the Lambda has left less the completion margin; the lease covers both. */
export function budgetFor(now: number, policy: ResolvedPolicy, request: WriteRequest, completionMarginMs: number) {
  const remaining = request.remainingTimeMs?.() ?? Infinity;
  const budgetMs = Math.max(0, Math.min(policy.executionTimeoutMs, remaining - completionMarginMs));
  return { budgetMs, leaseExpiresAt: now + budgetMs + completionMarginMs };
}

export const noTimeLeftError = () =>
  new TransientToolError(
    ErrorCode.TRANSIENT_FAILURE,
    'Not enough time was left in this invocation to run the operation; nothing was executed.',
  );

interface ToolRunsOptions {
  store: IdempotencyStore;
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  completionMarginMs: number;
  unknownRetryAfterMs: number;
  outcomes: Outcomes;
}

/** The engine's runs of a tool: the claimed path, the one-request path, and the run itself within its budget. */
export class ToolRuns {
  private readonly store: IdempotencyStore;
  private readonly clock: Clock;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly completionMarginMs: number;
  private readonly unknownRetryAfterMs: number;
  private readonly outcomes: Outcomes;

  constructor(options: ToolRunsOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.sleep = options.sleep;
    this.completionMarginMs = options.completionMarginMs;
    this.unknownRetryAfterMs = options.unknownRetryAfterMs;
    this.outcomes = options.outcomes;
  }

  /** The claimed path: the key is ours (claimed or taken over); run the tool within the lease and settle the record. */
  async execute<R>(
    record: IdempotencyRecord,
    policy: ResolvedPolicy,
    request: WriteRequest,
    execute: Executor<R>,
    emit: Emit,
    takenOver: boolean,
  ): Promise<WriteToolResult<R>> {
    const key = record.idempotencyKey;
    const now = this.clock();
    // Measured now (a follower may have waited before taking over) and never past the lease less the margin.
    const budgetMs = Math.min(
      budgetFor(now, policy, request, this.completionMarginMs).budgetMs,
      record.leaseExpiresAt - this.completionMarginMs - now,
    );
    const after: AfterExecution = { takenOver, policy, local: request.effect === 'local' };
    if (budgetMs <= 0) return this.outcomes.onExecutionFailure(record, 'transient', noTimeLeftError(), emit, after);
    const outcome = await this.invoke(record, budgetMs, policy, request, execute, 'claimed');
    if ('failure' in outcome) return this.outcomes.onExecutionFailure(record, outcome.failure, outcome.err, emit, after);
    if ('tooLarge' in outcome) return this.outcomes.refuseTooLarge(record, outcome.tooLarge, emit, policy);
    const { result, writes } = outcome;

    try {
      await this.store.settle(record, record.ownerToken, { status: 'SUCCEEDED', result }, this.clock(), writes);
      emit('executed');
      return WriteResults.succeeded(key, result);
    } catch (err) {
      if (err instanceof OwnershipLostError) {
        // Fenced out (a takeover or a follower marked us UNKNOWN): our writes did not commit.
        return this.outcomes.answerAfterLostFence<R>(record, emit);
      }
      if (err instanceof TransactionRejectedError) {
        // Definitely not committed (e.g. a business condition in the tool's own writes): nothing happened.
        return this.outcomes.onExecutionFailure(
          record,
          'transient',
          new TransientToolError(ErrorCode.TRANSIENT_FAILURE, err.message),
          emit,
          after,
        );
      }
      // The completion may or may not have committed: never claim either way, verify.
      const marked = await this.outcomes.markUnknownOrRead(
        record,
        { code: ErrorCode.OUTCOME_UNKNOWN, message: 'the store failed while recording the outcome' },
        'store_error',
        policy.inFlightWindowMs,
      );
      if ('moved' in marked) return this.outcomes.answerFromRecord<R>(marked.moved, record, emit);
      emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
      return WriteResults.unknown(key, marked.retryAfterMs);
    }
  }

  /**
   * The one-request path: execute first, then commit the settled record and the tool's writes in one request
   * conditioned on the key being free. A duplicate learns the holder's record from the same failed request. What
   * cannot be concluded in one request (a failure to record, a refused write) takes the claimed path, which records
   * it exactly as a tool that is not local would; a commit the store could not confirm is answered unknown.
   */
  async runOnce<R>(
    record: IdempotencyRecord,
    budgetMs: number,
    policy: ResolvedPolicy,
    request: WriteRequest,
    execute: Executor<R>,
    emit: Emit,
  ): Promise<OneRequestOutcome<R>> {
    const key = record.idempotencyKey;
    const runClaimed: AfterClaim<R> = (claimed, takenOver) => this.execute(claimed, policy, request, execute, emit, takenOver);
    const outcome = await this.invoke(record, budgetMs, policy, request, execute, 'one_request');
    if ('tooLarge' in outcome) return { claimFirst: (claimed) => this.outcomes.refuseTooLarge(claimed, outcome.tooLarge, emit, policy) };
    let settled: IdempotencyRecord;
    if ('failure' in outcome) {
      if (outcome.failure !== 'terminal') {
        return {
          claimFirst: (claimed, takenOver) =>
            this.outcomes.onExecutionFailure(claimed, outcome.failure, outcome.err, emit, {
              takenOver,
              policy,
              local: request.effect === 'local',
            }),
        };
      }
      transition('PROCESSING', 'fail');
      settled = { ...record, status: 'FAILED', error: toStoredError(outcome.err), errorType: 'terminal', updatedAt: this.clock() };
    } else {
      settled = { ...record, status: 'SUCCEEDED', result: outcome.result, updatedAt: this.clock() };
    }
    for (let attempt = 1; ; attempt++) {
      let commit: Awaited<ReturnType<IdempotencyStore['commitOnce']>>;
      try {
        commit = await this.store.commitOnce(
          settled,
          this.clock(),
          { onExpired: policy.onExpired },
          'failure' in outcome ? [] : outcome.writes,
        );
      } catch (err) {
        // A refused write of the tool's own: nothing committed; the claimed path runs the tool again and settles it.
        if (err instanceof TransactionRejectedError) return { claimFirst: runClaimed };
        if (err instanceof StoreUnavailableError) {
          // May have committed, and the store did not answer its own retries (same ClientRequestToken): a brownout.
          // No second path against a store that is down: the outcome is unknown, and a call with the same key
          // later either replays this commit or makes it.
          emit('unknown', ErrorCode.STORE_UNAVAILABLE);
          return { answer: WriteResults.unknown(key, this.unknownRetryAfterMs) };
        }
        throw err;
      }
      if (commit.committed) {
        if (settled.status === 'SUCCEEDED') {
          emit('executed');
          return { answer: WriteResults.succeeded(key, settled.result as R) };
        }
        emit('failed', settled.error?.code);
        return { answer: WriteResults.failed(key, storedErrorOf(settled)) };
      }
      if ('existing' in commit) return { held: commit.existing };
      if (attempt >= CONTENDED_COMMIT_ATTEMPTS) return { claimFirst: runClaimed };
      // Concurrent first calls: the other transaction settles within milliseconds; jitter keeps the retries apart.
      await this.sleep(fullJitterBackoffMs(attempt, { baseMs: CONTENDED_COMMIT_BACKOFF_BASE_MS }));
    }
  }

  /** Runs the tool within its budget; its result normalised to the JSON that is stored and replayed. */
  async invoke<R>(
    record: IdempotencyRecord,
    budgetMs: number,
    policy: ResolvedPolicy,
    request: WriteRequest,
    execute: Executor<R>,
    path: ExecutionPath,
  ): Promise<
    | { result: R; writes: ExtraWrite[] | undefined }
    | { failure: ReturnType<typeof classifyFailure>; err: unknown }
    | { tooLarge: ResultTooLargeError }
  > {
    const now = this.clock();
    const controller = new AbortController();
    const deadline = now + budgetMs;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new DeadlineExceeded(budgetMs);
        controller.abort(err);
        reject(err);
      }, budgetMs);
    });
    let execution: Execution<R>;
    try {
      execution = await Promise.race([
        execute({
          tenant: record.tenant,
          tool: record.tool,
          idempotencyKey: record.idempotencyKey,
          traceId: request.traceId,
          deadline,
          signal: controller.signal,
          now: this.clock,
          path,
        }),
        timedOut,
      ]);
    } catch (err) {
      return { failure: controller.signal.aborted ? 'uncertain' : classifyFailure(err), err };
    } finally {
      clearTimeout(timer);
    }

    // The result travels as JSON (MCP structuredContent) and is stored as JSON: normalising it here makes the
    // first answer identical to every replay (a Date becomes its ISO string on both).
    const json = JSON.stringify(execution.result ?? null);
    const size = Buffer.byteLength(json);
    if (size > policy.maxResultBytes) return { tooLarge: new ResultTooLargeError(size, policy.maxResultBytes) };
    return { result: (execution.result === undefined ? undefined : JSON.parse(json)) as R, writes: execution.writes };
  }
}
