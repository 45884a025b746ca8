import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import { systemClock, type Clock } from '../core/clock';
import { absenceIsConclusive, inFlightUntil, inFlightWindowMs } from '../core/in-flight';
import { leaseRemainingMs } from '../core/lease';
import { classifyFailure, ErrorCode, OwnershipLostError, ToolFailure, TransientToolError } from '../core/errors';
import type { ReconcileFinding } from '../core/reconcile';
import type { StoredError } from '../core/state-machine';
import { countForTool, MetricName } from '../observability/metrics';
import type { OutboxMessage } from './outbox-event';
import { OutboxDefaults } from '../core/outbox-budget';
import type { DeliveryMarker, OutboxStore } from './outbox-store';

/**
 * How one event type becomes its effect. Each method gets the event and `ctx.signal`, aborted when the claim's lease
 * is about to run out: hand it to every downstream call.
 *
 * @public
 */
export interface DeliveryHandler {
  /**
   * Performs the effect and returns the downstream's answer (a ticket id). Pass `message.event_id` to the downstream
   * wherever it accepts a reference. Throw TerminalToolError (refused, never retried), TransientToolError (known not
   * to have happened) or UncertainToolError (may have happened).
   */
  deliver(message: OutboxMessage, ctx: { signal: AbortSignal }): Promise<unknown>;
  /**
   * Asks the downstream whether an earlier attempt made the effect (by the event id it was given). Without it an
   * attempt that may have happened is run again: only downstreams that can be asked give exactly-once in every case.
   */
  verify?(message: OutboxMessage, ctx: { signal: AbortSignal }): Promise<ReconcileFinding>;
  /**
   * How long after it was sent a `deliver` request may still take effect (the provider keeps processing a request
   * the consumer gave up on). Until then a `verify` answering "absent" decides nothing: the delivery is deferred to
   * the window's end and asked again, never run a second time on that answer. Default: the consumer's lease plus
   * DOWNSTREAM_TIMEOUT_MS (one more request's span for the provider's own queueing and retries); set your provider's
   * documented processing bound if longer.
   */
  inFlightWindowMs?: number;
}

/**
 * What the outbox consumer did with one message: delivered, failed for good, already settled, or left for a retry.
 */
export type ConsumeOutcome =
  | { kind: 'delivered' }
  /** The downstream refused the effect for good; the event is FAILED. */
  | { kind: 'failed' }
  /** Already settled by an earlier delivery of the same event. */
  | { kind: 'duplicate' }
  /** Not done: leave the message on the queue and show it again after `delayMs`. */
  | { kind: 'retry'; delayMs: number; reason: string }
  /** Not done and the delivery budget is spent: move the message to the dead-letter queue now. */
  | { kind: 'dead-letter'; reason: string };

/**
 * The outbox consumer's parts and tuning: the outbox, the deliveries handlers, logger and clock, its timeouts, delivery budget and retries.
 */
export interface ConsumerOptions {
  outbox: OutboxStore;
  handlers: Readonly<Record<string, DeliveryHandler>>;
  logger: Logger;
  clock?: Clock;
  /** Bound of one downstream call; the claim's lease covers a verification and a delivery. */
  downstreamTimeoutMs: number;
  /** How long a delivery is retried, from the event's commit; then it is dead-lettered. Default 24 h. */
  deliveryBudgetMs?: number;
  /** First retry delay, doubling per receive up to 12 h (0 in tests). Default 1 s. */
  retryBaseMs?: number;
  /** After a retry is due, how long the sweep waits for it before re-sending the event. Default 60 s. */
  lostMessageGraceMs?: number;
}
/** Room after the downstream calls to write the settlement before the lease runs out. */
const SETTLE_MARGIN_MS = 1000;

/**
 * Delivers outbox events exactly once per effect, on an at-least-once queue.
 *
 * Before the effect, a conditional write claims the event with a lease and an owner token. A second delivery while
 * the lease is live finds the claim and backs off (it never runs the effect); one after the settlement is
 * acknowledged as a duplicate. A claim whose lease passed without a settlement (the consumer crashed, or could not
 * tell whether the effect happened) may be taken over, and the new owner first asks the downstream by event id;
 * only a confirmed absence runs the effect again, and "absent" confirms nothing while an earlier request may still
 * land (its in-flight window). The settlement of the claim and of the event commit together.
 */
export class OutboxConsumer {
  private readonly outbox: OutboxStore;
  private readonly handlers: Readonly<Record<string, DeliveryHandler>>;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly downstreamTimeoutMs: number;
  private readonly deliveryBudgetMs: number;
  private readonly retryBaseMs: number;
  private readonly lostMessageGraceMs: number;

  constructor(options: ConsumerOptions) {
    for (const [type, handler] of Object.entries(options.handlers)) {
      const window = handler.inFlightWindowMs;
      if (window !== undefined && !(Number.isInteger(window) && window >= 0))
        throw new TypeError(
          `the delivery handler of '${type}': inFlightWindowMs must be a whole number of milliseconds, 0 or more (got ${String(window)})`,
        );
    }
    this.outbox = options.outbox;
    this.handlers = options.handlers;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.downstreamTimeoutMs = options.downstreamTimeoutMs;
    this.deliveryBudgetMs = options.deliveryBudgetMs ?? OutboxDefaults.deliveryBudgetSeconds * 1000;
    this.retryBaseMs = options.retryBaseMs ?? OutboxDefaults.retryBaseMs;
    this.lostMessageGraceMs = options.lostMessageGraceMs ?? OutboxDefaults.redeliverAfterMs;
  }

  /** A verification and a delivery, each bounded by the downstream timeout, and the settlement. */
  get leaseMs(): number {
    return 2 * this.downstreamTimeoutMs + SETTLE_MARGIN_MS;
  }

  /**
   * How long after it was sent a delivery request of this handler may still apply its effect: its own
   * `inFlightWindowMs`, else the core's default from the two timeouts that end it (the claim's lease bounds the whole
   * attempt, as a tool's execution timeout bounds an execution).
   */
  inFlightWindowOf(handler: DeliveryHandler): number {
    return inFlightWindowMs({ inFlightWindowMs: handler.inFlightWindowMs, executionTimeoutMs: this.leaseMs }, this.downstreamTimeoutMs);
  }

  async consume(message: OutboxMessage, receiveCount: number): Promise<ConsumeOutcome> {
    const log = {
      event_id: message.event_id,
      tool: message.tool,
      tenant: message.tenant,
      key_hash: message.key_hash,
      receive_count: receiveCount,
    };
    if (!this.outbox.owns(message)) {
      // Another endpoint's event on a shared table (a misrouted message): neither run nor marked here. Its own relay
      // re-sends it to its own queue when its next look is due; this copy goes where a person sees it.
      this.logger.error('outbox event of another endpoint on this queue: not delivered here', {
        ...log,
        event_key_prefix: message.key_prefix ?? '',
      });
      return { kind: 'dead-letter', reason: "another endpoint's event" };
    }
    const handler = this.handlers[message.type];
    if (!handler) {
      this.logger.error('no delivery handler for outbox event type', { ...log, event_type: message.type });
      return this.giveUpOrRetry(
        message,
        receiveCount,
        { code: 'UNKNOWN_EVENT_TYPE', message: `no handler for ${message.type}` },
        OutboxDefaults.maxRetryDelayMs,
      );
    }
    const owner = randomUUID();
    const now = this.clock();
    const claim = await this.outbox.claimDelivery(message.event_id, owner, now + this.leaseMs, now);
    if (!claim.claimed) {
      if (claim.existing.state !== 'CLAIMED') {
        countForTool(MetricName.OutboxDuplicateDeliveries, message.tool);
        this.logger.info('duplicate outbox delivery skipped', { ...log, state: claim.existing.state });
        return { kind: 'duplicate' };
      }
      // Someone is delivering it right now: never run it twice; look again once their lease is over.
      return this.retry(receiveCount, leaseRemainingMs(claim.existing.leaseUntil, now) + 100, 'claimed by another delivery');
    }

    // Bounded so that our settlement lands before the lease lets anyone take over. The lease runs from before the
    // claim write, so a slow write (throttled, retried) eats into it; with nothing left, run nothing: the claim
    // expires and the next attempt asks the downstream first.
    const budgetMs = now + this.leaseMs - SETTLE_MARGIN_MS - this.clock();
    // The claim wrote our lease's end as the last moment a request may have been sent; until we send one, the
    // earlier owners' bound (none: 0) stays the true one, and we put it back whenever we stop without sending.
    const sentBefore = claim.previous ? lastSendOf(claim.previous) : 0;
    if (budgetMs <= 0) {
      this.logger.warn('outbox delivery not started: the claim write used up its lease', log);
      const error = { code: ErrorCode.OUTCOME_UNKNOWN, message: 'the claim write used up its lease' };
      // Best effort: unwritten, the next owner waits for a window after our lease, which is only slower.
      await this.outbox
        .deferDelivery(message.event_id, owner, { leaseUntil: this.clock(), lastSendBy: sentBefore, error })
        .catch(() => false);
      return this.retry(receiveCount, SETTLE_MARGIN_MS, error.message);
    }
    const signal = AbortSignal.timeout(budgetMs);
    const windowMs = this.inFlightWindowOf(handler);
    if (claim.previous) {
      const earlier = await this.verifyEarlierAttempt(message, handler, { signal }, log);
      if (earlier.kind === 'found') return this.settle(message, owner, { state: 'DELIVERED', result: earlier.result }, log, receiveCount);
      if (earlier.kind !== 'absent') {
        const error = { code: ErrorCode.OUTCOME_UNKNOWN, message: earlier.reason };
        await this.outbox.deferDelivery(message.event_id, owner, { leaseUntil: this.clock(), lastSendBy: sentBefore, error });
        return this.giveUpOrRetry(
          message,
          receiveCount,
          { code: ErrorCode.OUTCOME_UNKNOWN, message: 'could not verify an earlier attempt' },
          0,
          { effectMayExist: true },
        );
      }
      // "Absent" while an earlier request may still land decides nothing: keep the claim until the window's end,
      // when the same question gets an answer that counts. Never a second delivery on a guess.
      const decidable = inFlightUntil(sentBefore, windowMs);
      if (handler.verify && !absenceIsConclusive(decidable, this.clock())) {
        const error = { code: ErrorCode.OUTCOME_UNKNOWN, message: 'nothing found yet while an earlier delivery request may still land' };
        this.logger.info('outbox delivery deferred: an earlier request is still within its in-flight window', {
          ...log,
          decidable_at: decidable,
        });
        await this.outbox.deferDelivery(message.event_id, owner, { leaseUntil: decidable, lastSendBy: sentBefore, error });
        return this.giveUpOrRetry(message, receiveCount, error, leaseRemainingMs(decidable, this.clock()), { effectMayExist: true });
      }
    }

    let result: unknown;
    try {
      result = await handler.deliver(message, { signal });
    } catch (err) {
      const kind = signal.aborted ? 'uncertain' : classifyFailure(err);
      const error = toStoredError(err);
      this.logger.warn('outbox delivery failed', { ...log, failure: kind, error_code: error.code });
      if (kind === 'terminal') return this.settle(message, owner, { state: 'FAILED', error }, log, receiveCount);
      if (kind === 'transient') {
        await this.outbox.releaseDelivery(message.event_id, owner);
        // The downstream's Retry-After is a floor under the backoff.
        return this.giveUpOrRetry(message, receiveCount, error, err instanceof TransientToolError ? (err.retryAfterMs ?? 0) : 0);
      }
      // It may have happened, or still happen: keep the claim until our request's in-flight window has passed (we
      // stopped waiting now, so it was sent before now), then verify.
      const stoppedAt = this.clock();
      const verifyAt = inFlightUntil(stoppedAt, windowMs);
      await this.outbox.deferDelivery(message.event_id, owner, { leaseUntil: verifyAt, lastSendBy: stoppedAt, error });
      return this.giveUpOrRetry(message, receiveCount, error, windowMs, { effectMayExist: true });
    }
    return this.settle(message, owner, { state: 'DELIVERED', result }, log, receiveCount);
  }

  private async verifyEarlierAttempt(
    message: OutboxMessage,
    handler: DeliveryHandler,
    ctx: { signal: AbortSignal },
    log: Record<string, unknown>,
  ): Promise<ReconcileFinding> {
    if (!handler.verify) {
      this.logger.warn('re-running an outbox delivery that cannot be verified', log);
      return { kind: 'absent' };
    }
    let finding: ReconcileFinding;
    try {
      finding = await handler.verify(message, ctx);
    } catch (err) {
      return { kind: 'unreachable', reason: (err as Error)?.message ?? 'verification failed' };
    }
    // Only a confirmed absence runs the effect again: an answer we cannot read, or an "absent" that came after our
    // time ran out (not asked in time, and past the point where our claim protects a delivery), is no answer.
    if (finding?.kind === 'absent' && ctx.signal.aborted)
      return { kind: 'unreachable', reason: 'the lookup answered after its time ran out' };
    if (finding?.kind !== 'found' && finding?.kind !== 'absent' && finding?.kind !== 'unreachable') {
      return { kind: 'unreachable', reason: 'the lookup gave an answer that is neither found, absent nor unreachable' };
    }
    this.logger.info('verified an earlier delivery attempt', { ...log, finding: finding.kind });
    return finding;
  }

  private async settle(
    message: OutboxMessage,
    owner: string,
    outcome: { state: 'DELIVERED'; result: unknown } | { state: 'FAILED'; error: StoredError },
    log: Record<string, unknown>,
    receiveCount: number,
  ): Promise<ConsumeOutcome> {
    try {
      await this.outbox.settleDelivery(message.event_id, owner, outcome, this.clock());
    } catch (err) {
      // The effect happened (or was refused) but is not recorded: our claim stays until its lease passes, and the
      // next owner verifies. Keep the message so that someone does.
      const reason = err instanceof OwnershipLostError ? 'claim taken over' : 'settlement not written';
      this.logger.warn('could not settle an outbox delivery', { ...log, reason, error_name: (err as Error)?.name });
      return this.retry(receiveCount, this.leaseMs, reason);
    }
    if (outcome.state === 'DELIVERED') {
      countForTool(MetricName.OutboxDelivered, message.tool);
      this.logger.info('outbox event delivered', log);
      return { kind: 'delivered' };
    }
    countForTool(MetricName.OutboxDeliveryFailed, message.tool);
    this.logger.warn('outbox event refused by the downstream', { ...log, error_code: outcome.error.code });
    return { kind: 'failed' };
  }

  /**
   * A failed try: another one later while the event's delivery budget lasts (the last one at its end), then the
   * dead-letter queue. The budget, not the receive count, decides: it runs from the event's commit, so re-sends
   * and restarts do not extend it. Giving up marks the event FAILED first (its claim is left as is, so a redrive
   * from the DLQ still delivers exactly once), unless the effect may exist: then FAILED could be false, so the event
   * stays pending, the sweep sends it again, and the next consumer verifies with the downstream first.
   */
  private async giveUpOrRetry(
    message: OutboxMessage,
    receiveCount: number,
    error: StoredError,
    floorMs: number,
    options: { effectMayExist?: boolean } = {},
  ): Promise<ConsumeOutcome> {
    countForTool(MetricName.OutboxDeliveryRetries, message.tool);
    const now = this.clock();
    const budgetLeftMs = message.created_at + this.deliveryBudgetMs - now;
    const log = {
      event_id: message.event_id,
      tool: message.tool,
      tenant: message.tenant,
      key_hash: message.key_hash,
      error_code: error.code,
    };
    if (budgetLeftMs > 0) {
      const outcome = this.retry(receiveCount, floorMs, error.code, budgetLeftMs);
      // The table, not the queue, is the record: if this message is lost meanwhile, the sweep sends the event again.
      await this.scheduleLook(message, now + outcome.delayMs + this.lostMessageGraceMs);
      return outcome;
    }
    const spent = `delivery budget of ${Math.round(this.deliveryBudgetMs / 60_000)} min spent after ${receiveCount} attempts on this message`;
    if (options.effectMayExist) {
      this.logger.warn('outbox message goes to the dead-letter queue with its outcome unknown; the sweep sends it again', log);
      await this.scheduleLook(message, now + this.lostMessageGraceMs);
    } else {
      const failed = await this.outbox.failEvent(
        message.event_id,
        { code: error.code, message: `${error.message} (gave up: ${spent}; the message is in the dead-letter queue)` },
        now,
      );
      if (failed) {
        countForTool(MetricName.OutboxDeliveryFailed, message.tool);
        this.logger.error('outbox event sent to the dead-letter queue', { ...log, reason: spent });
      }
    }
    return { kind: 'dead-letter', reason: error.code };
  }

  /**
   * Another receive after at least `floorMs` and at least the backoff (doubling per receive, at most 12 h), never past
   * `limitMs`. Every wait is at least the backoff, so the receives a budget allows are bounded (receivesWithinBudget).
   */
  private retry(
    receiveCount: number,
    floorMs: number,
    reason: string,
    limitMs = Infinity,
  ): { kind: 'retry'; delayMs: number; reason: string } {
    const backoff = this.retryBaseMs * 2 ** Math.max(0, receiveCount - 1);
    const delayMs = Math.min(Math.max(backoff, floorMs), OutboxDefaults.maxRetryDelayMs, limitMs);
    return { kind: 'retry', delayMs, reason };
  }

  private async scheduleLook(message: OutboxMessage, at: number): Promise<void> {
    await this.outbox.scheduleLook(message.event_id, at).catch((err: unknown) => {
      // Not written: the sweep may send the event once more before the retry, which is harmless.
      this.logger.warn('could not schedule the next look at an outbox event', {
        event_id: message.event_id,
        error_name: (err as Error)?.name,
      });
    });
  }
}

/** The last moment an earlier owner may have sent a request; a claim written before it was kept: its lease's end. */
function lastSendOf(marker: DeliveryMarker): number {
  return marker.lastSendBy ?? marker.leaseUntil;
}

function toStoredError(err: unknown): StoredError {
  if (err instanceof ToolFailure) return { code: err.code, message: err.message };
  return { code: ErrorCode.INTERNAL_ERROR, message: 'the delivery failed unexpectedly' };
}
