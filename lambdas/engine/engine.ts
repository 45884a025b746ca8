import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '../core/clock';
import { ErrorCode, IdempotencyError, StoreUnavailableError } from '../core/errors';
import { fingerprint } from '../core/fingerprint';
import { DEFAULT_DOWNSTREAM_TIMEOUT_MS, inFlightUntil, unknownRetryAfterMs } from '../core/in-flight';
import { DEFAULT_POLICY, type IdempotencyPolicy, toolInFlightWindowMs } from '../core/tool-policy';
import { hashForLog, validateIdempotencyKey, validateTenantId, validateToolName } from '../core/idempotency-key';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import { decideForExisting, keyIsFree, type IdempotencyRecord } from '../core/state-machine';
import { type ConfirmationGate, type ConfirmationPorts, type ConfirmationRequirement, createConfirmationGate } from '../confirmation/gate';
import { silentObserver, type EngineEventType, type IdempotencyObserver } from './observer';
import { type Emit, Outcomes, replayOf, type ResolvedPolicy } from './outcomes';
import type { IdempotencyStore, RecordIdentity } from './persistence';
import { type AfterClaim, budgetFor, noTimeLeftError, ToolRuns } from './tool-runs';
import type { EngineAnswer, Executor, NeedsConfirmation, WriteRequest } from './write-request';

/**
 * The engine: one handler (`answer`) owns the idempotency state machine: validate, read or claim the key (asking the
 * confirmation gate first for a tool a person confirms), follow a key another call holds, then run the tool
 * (tool-runs.ts) and record what it came to (outcomes.ts). The request and answer types are write-request.ts.
 */

/**
 * Options of `IdempotencyEngine`: the store; optionally the clock, the observer, the confirmation gate and the engine's timings.
 * @public
 */
export interface EngineOptions {
  /** Where the records live: `InMemoryIdempotencyStore` in tests, `DynamoDbIdempotencyStore` deployed, or a store of your own. */
  store: IdempotencyStore;
  /** Epoch ms. Default `Date.now`. */
  clock?: Clock;
  /** Told of each call's outcome (metrics, logs). Default: none. */
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
  /** How the engine waits (a duplicate for a running first call, a backoff after a contended commit). Default `setTimeout`. */
  sleep?: (ms: number) => Promise<void>;
  /**
   * What the confirmation gate works with (lambdas/confirmation/gate.ts), given once: the people's decisions, the
   * round signer, where to log. Needed by `runConfirmed` with a requirement; without it such a call throws (a wiring
   * error: nobody could be asked). `createToolRuntime` and the endpoint's services give it.
   */
  confirmation?: ConfirmationPorts;
}

const CLAIM_AGAIN = Symbol('claim again');
type FollowResult<R> = WriteToolResult<R> | typeof CLAIM_AGAIN | { execute: IdempotencyRecord };

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
  private readonly sleep: (ms: number) => Promise<void>;
  /** Local tools' keys answered from a settled record, oldest first (a Map keeps insertion order). */
  private readonly answered = new Map<string, true>();
  private readonly answeredLimit: number;
  private readonly gate: ConfirmationGate | undefined;
  /** Records what an execution came to, and answers from the record. */
  private readonly outcomes: Outcomes;
  /** Runs the tool on the claimed or the one-request path. */
  private readonly runs: ToolRuns;

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
    this.gate = options.confirmation && createConfirmationGate({ ...options.confirmation, clock: this.clock });
    this.outcomes = new Outcomes(this.store, this.clock, this.unknownRetryAfterMs);
    this.runs = new ToolRuns({
      store: this.store,
      clock: this.clock,
      sleep: this.sleep,
      completionMarginMs: this.completionMarginMs,
      unknownRetryAfterMs: this.unknownRetryAfterMs,
      outcomes: this.outcomes,
    });
  }

  /** Runs `execute` at most once per key and answers every call with the key: the first call's result, a replay, or why not now. */
  run<R>(request: WriteRequest, policyInput: IdempotencyPolicy, execute: Executor<R>): Promise<WriteToolResult<R>> {
    // Without a confirmation requirement nobody is asked: the answer is never `needs_confirmation`.
    return this.answer(request, undefined, policyInput, execute) as Promise<WriteToolResult<R>>;
  }

  /**
   * As `run`, for a tool a person confirms before it runs (its `confirmation`, as the protocol's edge chose how): the
   * engine reads the record once and, when the key is free, asks the gate it was built with
   * (`EngineOptions.confirmation`, lambdas/confirmation/gate.ts); the call runs only on its yes, and is
   * answered `needs_confirmation` while the person is asked, or refused (declined, nobody can be asked). A key whose
   * record answers the call (a replay, a conflict, in progress) is answered from that record without asking anyone.
   * `confirmation` undefined: as `run`.
   */
  runConfirmed<R>(
    request: WriteRequest,
    confirmation: ConfirmationRequirement | undefined,
    policyInput: IdempotencyPolicy,
    execute: Executor<R>,
  ): Promise<WriteToolResult<R> | NeedsConfirmation> {
    return this.answer(request, confirmation, policyInput, execute);
  }

  private async answer<R>(
    request: WriteRequest,
    confirmation: ConfirmationRequirement | undefined,
    policyInput: IdempotencyPolicy,
    execute: Executor<R>,
  ): Promise<EngineAnswer<R>> {
    if (confirmation && !this.gate)
      throw new Error(`${request.tool} needs a confirmation, and this engine was built without one (EngineOptions.confirmation)`);
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
        const verdict = await this.gate!(confirmation!, { ...identity, fingerprint: fp }, { runId, keyHeld });
        if (verdict === 'held') runId = undefined;
        else if (verdict !== 'run') return 'ask' in verdict ? { outcome: 'needs_confirmation', ask: verdict.ask } : verdict.answer;
        // Free: the claim (or the one-request commit) takes it, conditioned on it being free still. Held since: the
        // loop answers from that record.
        known = heldSince;
      }
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = this.clock();
        const { budgetMs, leaseExpiresAt } = budgetFor(now, policy, request, this.completionMarginMs);
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
        let afterClaim: AfterClaim<R> = (claimed, takenOver) => this.runs.execute(claimed, policy, request, execute, emit, takenOver);
        let existing: IdempotencyRecord | undefined = known;
        known = undefined;
        runId = undefined;
        if (oneRequest && !existing) {
          const once = await this.runs.runOnce(record, budgetMs, policy, request, execute, emit);
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
            if (claim.answerLost) this.outcomes.lostClaimAnswers.add(record);
            return await afterClaim(record, false);
          }
          existing = claim.existing;
          // Our own settled record: a one-request commit whose answer was lost did apply.
          if (existing.ownerToken === record.ownerToken) return this.outcomes.answerFromRecord<R>(existing, record, emit);
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
          return WriteResults.unknown(key, this.outcomes.retryAfterUnknown(existing, policy.inFlightWindowMs, now));
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
          const { budgetMs, leaseExpiresAt } = budgetFor(now, policy, request, this.completionMarginMs);
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
}

/** Answers that come from a settled record for the key (its own execution, a replay, a conflict with it). */
const SETTLED_ANSWERS: ReadonlySet<EngineEventType> = new Set(['executed', 'failed', 'replayed', 'conflict']);
