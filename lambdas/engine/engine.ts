import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '../core/clock';
import {
  classifyFailure,
  ErrorCode,
  IdempotencyError,
  OwnershipLostError,
  ResultTooLargeError,
  StoreUnavailableError,
  ToolFailure,
  TransactionRejectedError,
  TransientToolError,
} from '../core/errors';
import { DEFAULT_NON_BUSINESS_FIELDS, fingerprint } from '../core/fingerprint';
import { hashForLog, validateIdempotencyKey, validateTenantId } from '../core/idempotency-key';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import {
  decideForExisting,
  transition,
  type ExpiryPolicy,
  type IdempotencyRecord,
  type StoredError,
} from '../core/state-machine';
import { silentObserver, type EngineEventType, type IdempotencyObserver } from './observer';
import type { ExtraWrite, IdempotencyStore, RecordIdentity } from './persistence';

/** Per-tool idempotency settings; every field has a default a newcomer can leave alone. */
export interface IdempotencyPolicy {
  /** Top-level arguments left out of the fingerprint. Default: trace_id, request_id, requested_at. */
  nonBusinessFields?: readonly string[];
  /** How long duplicates replay the stored result. Default 24 h. */
  retentionSeconds?: number;
  /** After retention: execute again (default) or refuse with REVIEW_REQUIRED. */
  onExpired?: ExpiryPolicy['onExpired'];
  /** With onExpired 'review': how long after retention the key is still remembered. Default 30 days. */
  reviewWindowSeconds?: number;
  /** The downstream dedups on our key, so a stale execution may be re-run. Default false. */
  reexecuteSafe?: boolean;
  /** Upper bound of one execution; the Lambda's remaining time may shorten it. Default 10 s. */
  executionTimeoutMs?: number;
  /** Largest result kept in the record (bytes of JSON). Default 64 KiB. */
  maxResultBytes?: number;
}

type ResolvedPolicy = Required<IdempotencyPolicy>;

export const DEFAULT_POLICY: ResolvedPolicy = {
  nonBusinessFields: DEFAULT_NON_BUSINESS_FIELDS,
  retentionSeconds: 24 * 3600,
  onExpired: 'execute',
  reviewWindowSeconds: 30 * 24 * 3600,
  reexecuteSafe: false,
  executionTimeoutMs: 10_000,
  maxResultBytes: 64 * 1024,
};

export interface ExecutionContext {
  tenant: string;
  tool: string;
  /** Pass it downstream wherever the downstream accepts one (Idempotency-Key header, client reference). */
  idempotencyKey: string;
  traceId?: string;
  /** Epoch ms after which the engine stops waiting and records the outcome as UNKNOWN. */
  deadline: number;
  /** Aborted at the deadline: hand it to every downstream call. */
  signal: AbortSignal;
  now: Clock;
}

export interface Execution<R> {
  result: R;
  /** Items committed in the same transaction as the SUCCEEDED record (business items, outbox events). */
  writes?: ExtraWrite[];
}

export type Executor<R> = (ctx: ExecutionContext) => Promise<Execution<R>>;

export interface WriteRequest {
  /** From the authenticated caller, never from tool arguments. */
  tenant: string;
  tool: string;
  idempotencyKey: unknown;
  args: Record<string, unknown>;
  traceId?: string;
  /** The Lambda context's getRemainingTimeInMillis; bounds the execution budget. */
  remainingTimeMs?: () => number;
}

export interface EngineOptions {
  store: IdempotencyStore;
  clock?: Clock;
  observer?: IdempotencyObserver;
  /** How long a duplicate waits for a running first call before answering in_progress. Default 2000 ms. */
  inProgressWaitMs?: number;
  /** Time kept back from the budget to write the completion. Default 1000 ms. */
  completionMarginMs?: number;
  /** retry_after_ms given with `unknown`: about one reconciler period. Default 5000 ms. */
  unknownRetryAfterMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

class DeadlineExceeded extends Error {
  constructor(ms: number) {
    super(`execution exceeded its ${ms} ms budget`);
    this.name = 'DeadlineExceeded';
  }
}

const CLAIM_AGAIN = Symbol('claim again');
type FollowResult<R> = WriteToolResult<R> | typeof CLAIM_AGAIN | { execute: IdempotencyRecord };

/**
 * The one place that owns the idempotency state machine: claim, execute once, settle, and answer duplicates.
 * Tools supply the business function; the engine decides whether it runs.
 */
export class IdempotencyEngine {
  private readonly store: IdempotencyStore;
  private readonly clock: Clock;
  private readonly observer: IdempotencyObserver;
  private readonly inProgressWaitMs: number;
  private readonly completionMarginMs: number;
  private readonly unknownRetryAfterMs: number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(options: EngineOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.observer = options.observer ?? silentObserver;
    this.inProgressWaitMs = options.inProgressWaitMs ?? 2000;
    this.completionMarginMs = options.completionMarginMs ?? 1000;
    this.unknownRetryAfterMs = options.unknownRetryAfterMs ?? 5000;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  async run<R>(request: WriteRequest, policyInput: IdempotencyPolicy, execute: Executor<R>): Promise<WriteToolResult<R>> {
    const started = this.clock();
    const policy: ResolvedPolicy = { ...DEFAULT_POLICY, ...policyInput };
    const rawKey = typeof request.idempotencyKey === 'string' ? request.idempotencyKey : '';
    let identity: RecordIdentity;
    try {
      identity = {
        tenant: validateTenantId(request.tenant),
        tool: request.tool,
        idempotencyKey: validateIdempotencyKey(request.idempotencyKey),
      };
    } catch (err) {
      if (err instanceof IdempotencyError) return WriteResults.rejected(rawKey, { code: err.code, message: err.message });
      throw err;
    }
    const emit = (type: EngineEventType, errorCode?: string) =>
      this.observer.record({
        type,
        tool: identity.tool,
        tenant: identity.tenant,
        keyHash: hashForLog(identity.idempotencyKey),
        durationMs: this.clock() - started,
        errorCode,
      });
    const fp = fingerprint(request.args, policy.nonBusinessFields);
    const key = identity.idempotencyKey;

    try {
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = this.clock();
        const { budgetMs, leaseExpiresAt } = this.budget(now, policy, request);
        const retainUntil = now + policy.retentionSeconds * 1000;
        const record: IdempotencyRecord = {
          ...identity,
          fingerprint: fp,
          status: 'PROCESSING',
          ownerToken: randomUUID(),
          createdAt: now,
          updatedAt: now,
          leaseExpiresAt,
          retainUntil,
          expiresAt: Math.ceil(
            (retainUntil + (policy.onExpired === 'review' ? policy.reviewWindowSeconds * 1000 : 0)) / 1000,
          ),
          traceId: request.traceId,
        };
        const claim = await this.store.claim(record, now);
        let toExecute: IdempotencyRecord | undefined = claim.claimed ? record : undefined;
        if (!claim.claimed) {
          const followed = await this.follow<R>(claim.existing, fp, policy, request, emit);
          if (followed === CLAIM_AGAIN) continue;
          if ('execute' in followed) toExecute = followed.execute;
          else return followed;
        }
        return await this.execute(toExecute!, budgetMs, policy, request, execute, emit);
      }
      throw new StoreUnavailableError('the key kept changing state while claiming it');
    } catch (err) {
      if (err instanceof StoreUnavailableError) {
        // Raised before execution (claim/read): nothing ran, so the same key is safe to retry.
        emit('store_unavailable', err.code);
        return WriteResults.transientFailure(key, { code: err.code, message: 'The idempotency store is unavailable; nothing was executed.' }, 1000);
      }
      throw err;
    }
  }

  /** Budget: the tool's timeout, cut to what the Lambda has left less the completion margin; the lease covers both. */
  private budget(now: number, policy: ResolvedPolicy, request: WriteRequest) {
    const remaining = request.remainingTimeMs?.() ?? Infinity;
    const budgetMs = Math.max(0, Math.min(policy.executionTimeoutMs, remaining - this.completionMarginMs));
    return { budgetMs, leaseExpiresAt: now + budgetMs + this.completionMarginMs };
  }

  private async follow<R>(
    initial: IdempotencyRecord,
    fp: string,
    policy: ResolvedPolicy,
    request: WriteRequest,
    emit: (type: EngineEventType, errorCode?: string) => void,
  ): Promise<FollowResult<R>> {
    let existing: IdempotencyRecord | undefined = initial;
    const key = initial.idempotencyKey;
    const waitUntil = this.clock() + this.inProgressWaitMs;
    let delay = 50;
    for (;;) {
      if (!existing) return CLAIM_AGAIN; // released while we waited: the key is free
      const now = this.clock();
      const decision = decideForExisting(existing, { fingerprint: fp, now, policy });
      switch (decision.action) {
        case 'claim_again':
          return CLAIM_AGAIN;
        case 'replay':
          emit('replayed');
          return existing.status === 'SUCCEEDED'
            ? WriteResults.succeeded(key, existing.result as R, { firstExecutedAt: existing.createdAt })
            : WriteResults.failed(key, existing.error ?? { code: ErrorCode.INTERNAL_ERROR, message: 'failed' }, {
                firstExecutedAt: existing.createdAt,
              });
        case 'conflict':
          emit('conflict', ErrorCode.IDEMPOTENCY_KEY_REUSED);
          return WriteResults.conflict(key);
        case 'unknown':
          emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
          return WriteResults.unknown(key, this.unknownRetryAfterMs);
        case 'review_required':
          emit('review_required', ErrorCode.REVIEW_REQUIRED);
          return WriteResults.reviewRequired(key);
        case 'mark_unknown': {
          const marked = await this.store.markUnknown(
            existing,
            existing.ownerToken,
            {
              error: { code: ErrorCode.OUTCOME_UNKNOWN, message: 'the executor stopped before recording an outcome' },
              errorType: 'lease_expired',
              nextCheckAt: now,
            },
            now,
          );
          if (marked) {
            emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
            return WriteResults.unknown(key, this.unknownRetryAfterMs);
          }
          existing = await this.store.get(existing);
          continue;
        }
        case 'take_over': {
          const { leaseExpiresAt } = this.budget(now, policy, request);
          const ownerToken = randomUUID();
          if (await this.store.takeOver(existing, existing.ownerToken, ownerToken, leaseExpiresAt, now)) {
            emit('taken_over');
            return { execute: { ...existing, ownerToken, leaseExpiresAt, updatedAt: now } };
          }
          existing = await this.store.get(existing);
          continue;
        }
        case 'wait': {
          if (now >= waitUntil) {
            emit('in_progress', ErrorCode.OPERATION_IN_PROGRESS);
            return WriteResults.inProgress(key, Math.max(100, Math.min(decision.leaseRemainingMs, 1000)));
          }
          await this.sleep(Math.min(delay, waitUntil - now, decision.leaseRemainingMs));
          delay = Math.min(delay * 2, 400);
          existing = await this.store.get(existing);
          continue;
        }
      }
    }
  }

  private async execute<R>(
    record: IdempotencyRecord,
    budgetMs: number,
    policy: ResolvedPolicy,
    request: WriteRequest,
    execute: Executor<R>,
    emit: (type: EngineEventType, errorCode?: string) => void,
  ): Promise<WriteToolResult<R>> {
    const key = record.idempotencyKey;
    const controller = new AbortController();
    const deadline = this.clock() + budgetMs;
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
          idempotencyKey: key,
          traceId: request.traceId,
          deadline,
          signal: controller.signal,
          now: this.clock,
        }),
        timedOut,
      ]);
    } catch (err) {
      return this.onExecutionFailure(record, controller.signal.aborted ? 'uncertain' : classifyFailure(err), err, emit);
    } finally {
      clearTimeout(timer);
    }

    const size = Buffer.byteLength(JSON.stringify(execution.result ?? null));
    if (size > policy.maxResultBytes) {
      const tooLarge = new ResultTooLargeError(size, policy.maxResultBytes);
      await this.markUnknownOrRead(record, { code: tooLarge.code, message: tooLarge.message }, 'result_too_large');
      emit('unknown', tooLarge.code);
      return { ...WriteResults.unknown(key, this.unknownRetryAfterMs, tooLarge.message), error: { code: tooLarge.code, message: tooLarge.message } };
    }

    try {
      await this.store.settle(record, record.ownerToken, { status: 'SUCCEEDED', result: execution.result }, this.clock(), execution.writes);
      emit('executed');
      return WriteResults.succeeded(key, execution.result);
    } catch (err) {
      if (err instanceof OwnershipLostError) {
        // A takeover fenced us out: our writes did not commit. Answer with what the record says now.
        emit('ownership_lost');
        return this.answerFromRecord<R>(await this.store.get(record), key);
      }
      if (err instanceof TransactionRejectedError) {
        // Definitely not committed (e.g. a business condition in the tool's own writes): nothing happened.
        return this.onExecutionFailure(record, 'transient', new TransientToolError(ErrorCode.TRANSIENT_FAILURE, err.message), emit);
      }
      // The completion may or may not have committed: never claim either way, verify.
      const settled = await this.markUnknownOrRead(
        record,
        { code: ErrorCode.OUTCOME_UNKNOWN, message: 'the store failed while recording the outcome' },
        'store_error',
      );
      if (settled?.status === 'SUCCEEDED' && settled.ownerToken === record.ownerToken) {
        emit('executed');
        return WriteResults.succeeded(key, settled.result as R);
      }
      emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
      return WriteResults.unknown(key, this.unknownRetryAfterMs);
    }
  }

  private async onExecutionFailure<R>(
    record: IdempotencyRecord,
    kind: ReturnType<typeof classifyFailure>,
    err: unknown,
    emit: (type: EngineEventType, errorCode?: string) => void,
  ): Promise<WriteToolResult<R>> {
    const key = record.idempotencyKey;
    const error = toStoredError(err);
    try {
      switch (kind) {
        case 'terminal':
          transition('PROCESSING', 'fail');
          await this.store.settle(record, record.ownerToken, { status: 'FAILED', error, errorType: 'terminal' }, this.clock());
          emit('failed', error.code);
          return WriteResults.failed(key, error);
        case 'transient': {
          transition('PROCESSING', 'release');
          await this.store.release(record, record.ownerToken);
          emit('released', error.code);
          const retryAfter = err instanceof TransientToolError && err.retryAfterMs !== undefined ? err.retryAfterMs : 1000;
          return WriteResults.transientFailure(key, error, retryAfter);
        }
        case 'uncertain':
          await this.markUnknownOrRead(record, error, 'uncertain');
          emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
          return WriteResults.unknown(key, this.unknownRetryAfterMs);
      }
    } catch (storeErr) {
      if (storeErr instanceof OwnershipLostError) return this.answerFromRecord<R>(await this.store.get(record), key);
      // The record stays PROCESSING until its lease passes; then it is treated as UNKNOWN. Never a blind retry.
      emit('unknown', ErrorCode.STORE_UNAVAILABLE);
      return WriteResults.unknown(key, this.unknownRetryAfterMs);
    }
  }

  /** Best effort PROCESSING -> UNKNOWN; if the record moved on, returns what it is now. */
  private async markUnknownOrRead(
    record: IdempotencyRecord,
    error: StoredError,
    errorType: IdempotencyRecord['errorType'],
  ): Promise<IdempotencyRecord | undefined> {
    const now = this.clock();
    try {
      const marked = await this.store.markUnknown(record, record.ownerToken, { error, errorType, nextCheckAt: now }, now);
      return marked ? undefined : await this.store.get(record);
    } catch {
      return undefined; // left PROCESSING: after its lease it is treated as UNKNOWN
    }
  }

  private answerFromRecord<R>(current: IdempotencyRecord | undefined, key: string): WriteToolResult<R> {
    if (current?.status === 'SUCCEEDED')
      return WriteResults.succeeded(key, current.result as R, { firstExecutedAt: current.createdAt });
    if (current?.status === 'FAILED')
      return WriteResults.failed(key, current.error ?? { code: ErrorCode.INTERNAL_ERROR, message: 'failed' }, {
        firstExecutedAt: current.createdAt,
      });
    if (current?.status === 'PROCESSING') return WriteResults.inProgress(key, 1000);
    return WriteResults.unknown(key, this.unknownRetryAfterMs);
  }
}

function toStoredError(err: unknown): StoredError {
  if (err instanceof DeadlineExceeded) return { code: ErrorCode.OUTCOME_UNKNOWN, message: err.message };
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : ErrorCode.INTERNAL_ERROR;
  // Unclassified errors may carry internals; only a tool's own classified errors pass their message on.
  const message = err instanceof ToolFailure ? err.message : 'the operation failed unexpectedly';
  return { code, message };
}
