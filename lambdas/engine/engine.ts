import { randomUUID } from 'node:crypto';
import { fullJitterBackoffMs } from '../core/backoff';
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
import { fingerprint } from '../core/fingerprint';
import { DEFAULT_DOWNSTREAM_TIMEOUT_MS, decidableAt, inFlightUntil, unknownRetryAfterMs } from '../core/in-flight';
import { DEFAULT_POLICY, type IdempotencyPolicy, type ToolEffect, toolInFlightWindowMs } from '../core/tool-policy';
import { hashForLog, validateIdempotencyKey, validateTenantId, validateToolName } from '../core/idempotency-key';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import { decideForExisting, isSettled, keyIsFree, transition, type IdempotencyRecord, type StoredError } from '../core/state-machine';
import { type ConfirmationAsk, type ConfirmationRequirement, confirmBeforeRunning } from './confirmation-gate';
import { silentObserver, type EngineEventType, type IdempotencyObserver } from './observer';
import type { ExtraWrite, IdempotencyStore, RecordIdentity } from './persistence';

/** A tool's settings as one run uses them: every default applied, the window resolved (`toolInFlightWindowMs`). */
type ResolvedPolicy = Required<IdempotencyPolicy>;

/** @public */
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
  /**
   * 'one_request' (a local tool's first attempt): the writes commit only if the key is free, and a write refused by
   * its own condition sends the call down the claimed path, which runs the tool again with 'claimed'. A read that
   * only guards against items left by an earlier use of the key can wait for that second run.
   */
  path: ExecutionPath;
}

/** @public */
export type ExecutionPath = 'one_request' | 'claimed';

/** @public */
export interface Execution<R> {
  result: R;
  /** Items committed in the same transaction as the SUCCEEDED record (business items, outbox events). */
  writes?: ExtraWrite[];
}

/** @public */
export type Executor<R> = (ctx: ExecutionContext) => Promise<Execution<R>>;

/** @public */
export interface WriteRequest {
  /** From the authenticated caller, never from tool arguments. */
  tenant: string;
  tool: string;
  idempotencyKey: unknown;
  args: Record<string, unknown>;
  traceId?: string;
  /** The Lambda context's getRemainingTimeInMillis; bounds the execution budget. */
  remainingTimeMs?: () => number;
  /** What the tool's execution touches; 'local' takes the one-request path. Default 'external'. */
  effect?: ToolEffect;
  /**
   * The caller says this key was likely sent before (a client's retry hint, `LIKELY_REPLAY_META_KEY` on MCP): a local
   * tool's record is then read first, as for a key this engine answered. It chooses the order of the requests only:
   * a key found free still goes to the conditional write, so a wrong or forged hint costs one read and no answer.
   */
  likelyReplay?: boolean;
  /**
   * The key may only be answered from its record (an operation id past its expiry still names the operation it
   * ran): a call that finds it free gets this answer instead, and nothing runs.
   */
  onlyIfHeld?: WriteToolResult<never>;
  /** Kept on the record from its claim (`IdempotencyRecord.memo`): what the tool's reconcile needs, at no extra write. */
  memo?: unknown;
}

/**
 * The engine's answer while a person is asked to confirm (nothing ran, nothing was written for the key).
 *
 * @public
 */
export interface NeedsConfirmation {
  outcome: 'needs_confirmation';
  ask: ConfirmationAsk;
}

/**
 * What `runConfirmed` answers: the result contract, or the ask while the person is asked.
 *
 * @public
 */
export type EngineAnswer<R> = WriteToolResult<R> | NeedsConfirmation;

/** @public */
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
  /**
   * The bound of one downstream call (DOWNSTREAM_TIMEOUT_MS): with a tool's execution timeout, it gives the default
   * of the tool's `inFlightWindowMs`. Give the reconciler the same. Default 3000 ms.
   */
  downstreamTimeoutMs?: number;
  /**
   * How many keys of local tools this engine remembers having answered from a settled record (the most recent
   * ones). A call with such a key is likely a retry: it reads the record first, so its replay costs one read instead
   * of a refused transaction carrying the tool's items. 0 turns it off. Default 10 000.
   */
  answeredKeys?: number;
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

/** What to do with the key once it is ours: execute (the claimed path), or record what the one-request path saw. */
type AfterClaim<R> = (record: IdempotencyRecord, takenOver: boolean) => Promise<WriteToolResult<R>>;
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

/**
 * The one place that owns the idempotency state machine: claim, execute once, settle, and answer duplicates.
 * Tools supply the business function; the engine decides whether it runs.
 * @public
 */
export class IdempotencyEngine {
  private readonly store: IdempotencyStore;
  private readonly clock: Clock;
  private readonly observer: IdempotencyObserver;
  private readonly inProgressWaitMs: number;
  private readonly completionMarginMs: number;
  private readonly unknownRetryAfterMs: number;
  private readonly downstreamTimeoutMs: number;
  /** Claims whose store said an earlier attempt's answer was lost (`ClaimResult.answerLost`). */
  private readonly lostClaimAnswers = new WeakSet<IdempotencyRecord>();
  private readonly sleep: (ms: number) => Promise<void>;
  /** Local tools' keys answered from a settled record, oldest first (a Map keeps insertion order). */
  private readonly answered = new Map<string, true>();
  private readonly answeredLimit: number;

  constructor(options: EngineOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.observer = options.observer ?? silentObserver;
    this.inProgressWaitMs = options.inProgressWaitMs ?? 2000;
    this.completionMarginMs = options.completionMarginMs ?? 1000;
    this.unknownRetryAfterMs = options.unknownRetryAfterMs ?? 5000;
    this.downstreamTimeoutMs = options.downstreamTimeoutMs ?? DEFAULT_DOWNSTREAM_TIMEOUT_MS;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.answeredLimit = options.answeredKeys ?? 10_000;
  }

  /** Runs `execute` at most once per key and answers every call with the key: the first call's result, a replay, or why not now. */
  run<R>(request: WriteRequest, policyInput: IdempotencyPolicy, execute: Executor<R>): Promise<WriteToolResult<R>> {
    // Without a confirmation requirement nobody is asked: the answer is never `needs_confirmation`.
    return this.answer(request, undefined, policyInput, execute) as Promise<WriteToolResult<R>>;
  }

  /**
   * As `run`, for a tool a person confirms before it runs (its `confirmation`): the engine reads the record once and,
   * when the key is free, asks the gate (lambdas/engine/confirmation-gate.ts); the call runs only on its yes, and is
   * answered `needs_confirmation` while the person is asked, or refused (declined, nobody can be asked). A key whose
   * record answers the call (a replay, a conflict, in progress) is answered from that record without asking anyone.
   * `confirmation` undefined: as `run`.
   */
  runConfirmed<R>(
    request: WriteRequest,
    confirmation: ConfirmationRequirement | undefined,
    policyInput: IdempotencyPolicy,
    execute: Executor<R>,
  ): Promise<EngineAnswer<R>> {
    return this.answer(request, confirmation, policyInput, execute);
  }

  private async answer<R>(
    request: WriteRequest,
    confirmation: ConfirmationRequirement | undefined,
    policyInput: IdempotencyPolicy,
    execute: Executor<R>,
  ): Promise<EngineAnswer<R>> {
    const started = this.clock();
    const policy: ResolvedPolicy = {
      ...DEFAULT_POLICY,
      ...policyInput,
      inFlightWindowMs: toolInFlightWindowMs(policyInput, this.downstreamTimeoutMs, request.effect),
    };
    const rawKey = typeof request.idempotencyKey === 'string' ? request.idempotencyKey : '';
    // A bad tool name is a programming error, not a caller's: it would alias storage keys, so fail loudly.
    validateToolName(request.tool);
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
    const key = identity.idempotencyKey;
    let fp: string;
    try {
      fp = fingerprint(request.args, policy.nonBusinessFields);
    } catch {
      // NaN, Infinity, BigInt: arguments that have no canonical JSON cannot be compared with a retry.
      return WriteResults.rejected(key, { code: ErrorCode.INVALID_ARGUMENTS, message: 'the arguments are not representable as JSON' });
    }
    const local = request.effect === 'local';
    const answeredKey = `${identity.tenant}#${identity.tool}#${key}`;
    const emit: Emit = (type, errorCode) => {
      if (local && SETTLED_ANSWERS.has(type)) this.rememberAnswered(answeredKey);
      this.observer.record({
        type,
        tool: identity.tool,
        tenant: identity.tenant,
        keyHash: hashForLog(key),
        durationMs: this.clock() - started,
        errorCode,
      });
    };

    try {
      let oneRequest = local;
      // A key this engine answered, or one the client says it sent before, is likely a retry: its record, read first,
      // answers it without running the tool or sending the transaction (refused, it would still cost a write of every
      // item it carries). Only a shortcut to the answer a held record gives: a key found free goes on to the
      // conditional write as any other.
      // A gated call (a person confirms, an expired operation id) reads first too: the read that decides whether
      // anyone is asked; a held key goes on from the record it read, with no second read.
      const gated = confirmation !== undefined || request.onlyIfHeld !== undefined;
      const readFirst = gated || (local && (request.likelyReplay === true || this.answered.has(answeredKey)));
      let known = readFirst ? await this.store.get(identity) : undefined;
      // The run a person's yes lets go: its record's owner token, recorded on the approval it uses.
      let runId: string | undefined;
      if (gated && (!known || keyIsFree(known, this.clock(), policy.onExpired))) {
        if (request.onlyIfHeld) return request.onlyIfHeld;
        runId = randomUUID();
        // A yes used by a call that claimed the key after this one read it free is that call's run, not a new
        // operation: the gate reads the key once more before it asks anew, and a held key answers from its record.
        let heldSince: IdempotencyRecord | undefined;
        const keyHeld = async () => {
          const record = await this.store.get(identity);
          heldSince = record && !keyIsFree(record, this.clock(), policy.onExpired) ? record : undefined;
          return heldSince !== undefined;
        };
        const verdict = await confirmBeforeRunning(confirmation!, { ...identity, fingerprint: fp }, { runId, keyHeld });
        if (verdict === 'held') runId = undefined;
        else if (verdict !== 'run') return 'ask' in verdict ? { outcome: 'needs_confirmation', ask: verdict.ask } : verdict.answer;
        // Free: the claim (or the one-request commit) takes it, conditioned on it being free still. Held since: the
        // loop answers from that record.
        known = heldSince;
      }
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = this.clock();
        const { budgetMs, leaseExpiresAt } = this.budget(now, policy, request);
        // Without time to run, claiming would only park the key until the lease passes, then as UNKNOWN.
        if (budgetMs <= 0) return this.noTimeLeft(key, emit);
        const retainUntil = now + policy.retentionSeconds * 1000;
        // Listed one by one: `{ ...identity, <10 more> }` is needlessly slow in V8 on this hot path.
        const record: IdempotencyRecord = {
          tenant: identity.tenant,
          tool: identity.tool,
          idempotencyKey: identity.idempotencyKey,
          fingerprint: fp,
          status: 'PROCESSING',
          ownerToken: runId ?? randomUUID(),
          createdAt: now,
          updatedAt: now,
          leaseExpiresAt,
          retainUntil,
          expiresAt: Math.floor((retainUntil + (policy.onExpired === 'review' ? policy.reviewWindowSeconds * 1000 : 0)) / 1000),
          traceId: request.traceId,
          memo: request.memo,
        };
        let afterClaim: AfterClaim<R> = (claimed, takenOver) => this.execute(claimed, policy, request, execute, emit, takenOver);
        let existing: IdempotencyRecord | undefined = known;
        known = undefined;
        runId = undefined;
        if (oneRequest && !existing) {
          const once = await this.runOnce(record, budgetMs, policy, request, execute, emit);
          if ('answer' in once) return once.answer;
          if ('held' in once) existing = once.held;
          else {
            oneRequest = false;
            afterClaim = once.claimFirst;
          }
        }
        if (!existing) {
          const claim = await this.store.claim(record, now, { onExpired: policy.onExpired });
          if (claim.claimed) {
            if (claim.answerLost) this.lostClaimAnswers.add(record);
            return await afterClaim(record, false);
          }
          existing = claim.existing;
          // Our own settled record: a one-request commit whose answer was lost did apply.
          if (existing.ownerToken === record.ownerToken) return this.answerFromRecord<R>(existing, record, emit);
        }
        const followed = await this.follow<R>(existing, fp, policy, request, emit);
        if (followed === CLAIM_AGAIN) continue;
        if (!('execute' in followed)) return followed;
        return await afterClaim(followed.execute, true);
      }
      throw new StoreUnavailableError('the key kept changing state while claiming it');
    } catch (err) {
      if (err instanceof StoreUnavailableError) {
        // Only claims and reads before execution get here (execute() answers its own store errors). Nothing ran in
        // this call, but the key's state cannot be read: an earlier call with it may have run, so never "failed".
        emit('store_unavailable', err.code);
        const message = 'The idempotency store is unavailable; call again later with the same key, never with a new one.';
        return { ...WriteResults.unknown(key, this.unknownRetryAfterMs, message), error: { code: err.code, message } };
      }
      throw err;
    }
  }

  private rememberAnswered(answeredKey: string) {
    if (this.answeredLimit <= 0) return;
    this.answered.delete(answeredKey);
    this.answered.set(answeredKey, true);
    if (this.answered.size > this.answeredLimit) this.answered.delete(this.answered.keys().next().value!);
  }

  /** Budget: the tool's timeout, cut to what the Lambda has left less the completion margin; the lease covers both. */
  private budget(now: number, policy: ResolvedPolicy, request: WriteRequest) {
    const remaining = request.remainingTimeMs?.() ?? Infinity;
    const budgetMs = Math.max(0, Math.min(policy.executionTimeoutMs, remaining - this.completionMarginMs));
    return { budgetMs, leaseExpiresAt: now + budgetMs + this.completionMarginMs };
  }

  private noTimeLeft<R>(key: string, emit: Emit): WriteToolResult<R> {
    const err = noTimeLeftError();
    emit('released', err.code);
    return WriteResults.transientFailure(key, { code: err.code, message: err.message }, 1000);
  }

  private async follow<R>(
    initial: IdempotencyRecord,
    fp: string,
    policy: ResolvedPolicy,
    request: WriteRequest,
    emit: Emit,
  ): Promise<FollowResult<R>> {
    let existing: IdempotencyRecord | undefined = initial;
    const key = initial.idempotencyKey;
    // The wait is bounded by the time slept, not by the clock: an injected (frozen) clock cannot make it endless.
    let waitedMs = 0;
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
          return replayOf<R>(existing);
        case 'conflict':
          emit('conflict', ErrorCode.IDEMPOTENCY_KEY_REUSED);
          return WriteResults.conflict(key);
        case 'unknown':
          emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
          return WriteResults.unknown(key, this.retryAfterUnknown(existing, policy.inFlightWindowMs, now));
        case 'review_required':
          emit('review_required', ErrorCode.REVIEW_REQUIRED);
          return WriteResults.reviewRequired(key);
        case 'mark_unknown': {
          // The same fenced transition the reconciler makes for a stale lease (PROCESSING -> UNKNOWN, due now). The
          // vanished executor's requests were all sent before its lease ended; one may still land for the window.
          const until = inFlightUntil(existing.leaseExpiresAt, policy.inFlightWindowMs);
          if (await this.store.expireLease(existing, now, until)) {
            emit('unknown', ErrorCode.OUTCOME_UNKNOWN);
            return WriteResults.unknown(key, unknownRetryAfterMs(until, now, this.unknownRetryAfterMs));
          }
          existing = await this.store.get(existing);
          continue;
        }
        case 'take_over': {
          const { budgetMs, leaseExpiresAt } = this.budget(now, policy, request);
          if (budgetMs <= 0) return this.noTimeLeft(key, emit);
          const ownerToken = randomUUID();
          const takenOver = { ...existing, ownerToken, leaseExpiresAt, updatedAt: now };
          if (await this.store.takeOver(existing, existing.ownerToken, ownerToken, leaseExpiresAt, now)) {
            emit('taken_over');
            return { execute: takenOver };
          }
          existing = await this.store.get(existing);
          // Our takeover was applied and its answer lost (the SDK retried it): the record is ours.
          if (existing?.status === 'PROCESSING' && existing.ownerToken === ownerToken) {
            emit('taken_over');
            return { execute: takenOver };
          }
          continue;
        }
        case 'wait': {
          if (waitedMs >= this.inProgressWaitMs) {
            emit('in_progress', ErrorCode.OPERATION_IN_PROGRESS);
            return WriteResults.inProgress(key, Math.max(100, Math.min(decision.leaseRemainingMs, 1000)));
          }
          // Waking at the lease's end lets a stale record be handled within this call.
          const pause = Math.max(1, Math.min(delay, this.inProgressWaitMs - waitedMs, decision.leaseRemainingMs));
          await this.sleep(pause);
          waitedMs += pause;
          delay = Math.min(delay * 2, 400);
          existing = await this.store.get(existing);
          continue;
        }
      }
    }
  }

  private async execute<R>(
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
    const budgetMs = Math.min(this.budget(now, policy, request).budgetMs, record.leaseExpiresAt - this.completionMarginMs - now);
    const after: AfterExecution = { takenOver, policy, local: request.effect === 'local' };
    if (budgetMs <= 0) return this.onExecutionFailure(record, 'transient', noTimeLeftError(), emit, after);
    const outcome = await this.invoke(record, budgetMs, policy, request, execute, 'claimed');
    if ('failure' in outcome) return this.onExecutionFailure(record, outcome.failure, outcome.err, emit, after);
    if ('tooLarge' in outcome) return this.refuseTooLarge(record, outcome.tooLarge, emit, policy);
    const { result, writes } = outcome;

    try {
      await this.store.settle(record, record.ownerToken, { status: 'SUCCEEDED', result }, this.clock(), writes);
      emit('executed');
      return WriteResults.succeeded(key, result);
    } catch (err) {
      if (err instanceof OwnershipLostError) {
        // Fenced out (a takeover or a follower marked us UNKNOWN): our writes did not commit.
        return this.answerAfterLostFence<R>(record, emit);
      }
      if (err instanceof TransactionRejectedError) {
        // Definitely not committed (e.g. a business condition in the tool's own writes): nothing happened.
        return this.onExecutionFailure(record, 'transient', new TransientToolError(ErrorCode.TRANSIENT_FAILURE, err.message), emit, after);
      }
      // The completion may or may not have committed: never claim either way, verify.
      const marked = await this.markUnknownOrRead(
        record,
        { code: ErrorCode.OUTCOME_UNKNOWN, message: 'the store failed while recording the outcome' },
        'store_error',
        policy.inFlightWindowMs,
      );
      if ('moved' in marked) return this.answerFromRecord<R>(marked.moved, record, emit);
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
  private async runOnce<R>(
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
    if ('tooLarge' in outcome) return { claimFirst: (claimed) => this.refuseTooLarge(claimed, outcome.tooLarge, emit, policy) };
    let settled: IdempotencyRecord;
    if ('failure' in outcome) {
      if (outcome.failure !== 'terminal') {
        return {
          claimFirst: (claimed, takenOver) =>
            this.onExecutionFailure(claimed, outcome.failure, outcome.err, emit, { takenOver, policy, local: request.effect === 'local' }),
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
  private async invoke<R>(
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

  /** The tool ran (its downstream may have acted) but its outcome cannot be kept: verify it, never re-run blindly. */
  private async refuseTooLarge<R>(
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

  private async onExecutionFailure<R>(
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
  private async markUnknownOrRead(
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
  private retryAfterUnknown(record: IdempotencyRecord, windowMs: number, now: number): number {
    return unknownRetryAfterMs(Math.max(record.nextCheckAt ?? now, decidableAt(record, windowMs)), now, this.unknownRetryAfterMs);
  }

  /** A fenced write of ours was refused: answer from the record as it is now (after execution: never "nothing ran"). */
  private async answerAfterLostFence<R>(record: IdempotencyRecord, emit: Emit, whenGone?: WriteToolResult<R>): Promise<WriteToolResult<R>> {
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
  private answerFromRecord<R>(current: IdempotencyRecord | undefined, ours: IdempotencyRecord, emit: Emit): WriteToolResult<R> {
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

type Emit = (type: EngineEventType, errorCode?: string) => void;

/** What an execution's failure is answered with depends on: whether it took over a stale one, the tool's settings. */
interface AfterExecution {
  takenOver: boolean;
  policy: ResolvedPolicy;
  local: boolean;
}

/** Answers that come from a settled record for the key (its own execution, a replay, a conflict with it). */
const SETTLED_ANSWERS: ReadonlySet<EngineEventType> = new Set(['executed', 'failed', 'replayed', 'conflict']);

const TAKEN_OVER_NOT_FINISHED =
  'An earlier attempt with this key did not finish, and this one could not either; call again with the same key, never with a new one.';

const noTimeLeftError = () =>
  new TransientToolError(
    ErrorCode.TRANSIENT_FAILURE,
    'Not enough time was left in this invocation to run the operation; nothing was executed.',
  );

function storedErrorOf(record: IdempotencyRecord): StoredError {
  return record.error ?? { code: ErrorCode.INTERNAL_ERROR, message: 'the operation failed' };
}

/** A duplicate's answer: the stored outcome, marked as a replay with the first execution's time. */
function replayOf<R>(record: IdempotencyRecord): WriteToolResult<R> {
  const replay = { firstExecutedAt: record.createdAt };
  return record.status === 'SUCCEEDED'
    ? WriteResults.succeeded(record.idempotencyKey, record.result as R, replay)
    : WriteResults.failed(record.idempotencyKey, storedErrorOf(record), replay);
}

function toStoredError(err: unknown): StoredError {
  if (err instanceof DeadlineExceeded) return { code: ErrorCode.OUTCOME_UNKNOWN, message: err.message };
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : ErrorCode.INTERNAL_ERROR;
  // Unclassified errors may carry internals; only a tool's own classified errors pass their message on.
  const message = err instanceof ToolFailure ? err.message : 'the operation failed unexpectedly';
  return { code, message };
}
