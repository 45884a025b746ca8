import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import { systemClock, type Clock } from '../core/clock';
import { classifyFailure, ErrorCode, OwnershipLostError, ToolFailure } from '../core/errors';
import type { ReconcileFinding } from '../core/reconcile';
import type { StoredError } from '../core/state-machine';
import { countForTool, MetricName } from '../observability/metrics';
import type { OutboxMessage } from './outbox-event';
import type { OutboxStore } from './outbox-store';

export interface DeliveryContext {
  /** Aborted when the claim's lease is about to run out: hand it to every downstream call. */
  signal: AbortSignal;
}

/** How one event type becomes its effect. */
export interface DeliveryHandler {
  /**
   * Performs the effect and returns the downstream's answer (a ticket id). Pass `message.event_id` to the downstream
   * wherever it accepts a reference. Throw TerminalToolError (refused, never retried), TransientToolError (known not
   * to have happened) or UncertainToolError (may have happened).
   */
  deliver(message: OutboxMessage, ctx: DeliveryContext): Promise<unknown>;
  /**
   * Asks the downstream whether an earlier attempt made the effect (by the event id it was given). Without it an
   * attempt that may have happened is run again: only downstreams that can be asked give exactly-once in every case.
   */
  verify?(message: OutboxMessage, ctx: DeliveryContext): Promise<ReconcileFinding>;
}

export type ConsumeOutcome =
  | { kind: 'delivered' }
  /** The downstream refused the effect for good; the event is FAILED. */
  | { kind: 'failed' }
  /** Already settled by an earlier delivery of the same event. */
  | { kind: 'duplicate' }
  /** Not done: leave the message on the queue and show it again after `delayMs`. */
  | { kind: 'retry'; delayMs: number; reason: string };

export interface ConsumerOptions {
  outbox: OutboxStore;
  handlers: Readonly<Record<string, DeliveryHandler>>;
  logger: Logger;
  clock?: Clock;
  /** Bound of one downstream call; the claim's lease covers a verification and a delivery. */
  downstreamTimeoutMs: number;
  /** The queue's redrive count: a failure on this receive is the last one before the dead-letter queue. */
  maxReceiveCount: number;
  /** First retry delay after a transient failure, doubling per receive (0 in tests). */
  retryBaseMs?: number;
}

const MAX_RETRY_DELAY_MS = 15 * 60_000;
/** Room after the downstream calls to write the settlement before the lease runs out. */
const SETTLE_MARGIN_MS = 1000;

/**
 * Delivers outbox events exactly once per effect, on an at-least-once queue.
 *
 * Before the effect, a conditional write claims the event with a lease and an owner token. A second delivery while
 * the lease is live finds the claim and backs off (it never runs the effect); one after the settlement is
 * acknowledged as a duplicate. A claim whose lease passed without a settlement (the consumer crashed, or could not
 * tell whether the effect happened) may be taken over, and the new owner first asks the downstream by event id;
 * only a confirmed absence runs the effect again. The settlement of the claim and of the event commit together.
 */
export class OutboxConsumer {
  private readonly outbox: OutboxStore;
  private readonly handlers: Readonly<Record<string, DeliveryHandler>>;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly downstreamTimeoutMs: number;
  private readonly maxReceiveCount: number;
  private readonly retryBaseMs: number;

  constructor(options: ConsumerOptions) {
    this.outbox = options.outbox;
    this.handlers = options.handlers;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.downstreamTimeoutMs = options.downstreamTimeoutMs;
    this.maxReceiveCount = options.maxReceiveCount;
    this.retryBaseMs = options.retryBaseMs ?? 1000;
  }

  /** A verification and a delivery, each bounded by the downstream timeout, and the settlement. */
  get leaseMs(): number {
    return 2 * this.downstreamTimeoutMs + SETTLE_MARGIN_MS;
  }

  async consume(message: OutboxMessage, receiveCount: number): Promise<ConsumeOutcome> {
    const log = { event_id: message.event_id, tool: message.tool, tenant: message.tenant, key_hash: message.key_hash, receive_count: receiveCount };
    const handler = this.handlers[message.type];
    if (!handler) {
      this.logger.error('no delivery handler for outbox event type', { ...log, event_type: message.type });
      return this.giveUpOrRetry(message, receiveCount, { code: 'UNKNOWN_EVENT_TYPE', message: `no handler for ${message.type}` }, MAX_RETRY_DELAY_MS);
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
      return { kind: 'retry', delayMs: Math.max(0, claim.existing.leaseUntil - now) + 100, reason: 'claimed by another delivery' };
    }

    // Bounded so that our settlement lands before the lease lets anyone take over. The lease runs from before the
    // claim write, so a slow write (throttled, retried) eats into it; with nothing left, run nothing: the claim
    // expires and the next attempt asks the downstream first.
    const budgetMs = now + this.leaseMs - SETTLE_MARGIN_MS - this.clock();
    if (budgetMs <= 0) {
      this.logger.warn('outbox delivery not started: the claim write used up its lease', log);
      return { kind: 'retry', delayMs: SETTLE_MARGIN_MS, reason: 'the claim write used up its lease' };
    }
    const signal = AbortSignal.timeout(budgetMs);
    if (claim.previous) {
      const earlier = await this.verifyEarlierAttempt(message, handler, { signal }, log);
      if (earlier.kind === 'found') return this.settle(message, owner, { state: 'DELIVERED', result: earlier.result }, log);
      if (earlier.kind === 'unreachable') {
        await this.outbox.deferDelivery(message.event_id, owner, this.clock(), { code: ErrorCode.OUTCOME_UNKNOWN, message: earlier.reason });
        return this.giveUpOrRetry(message, receiveCount, { code: ErrorCode.OUTCOME_UNKNOWN, message: 'could not verify an earlier attempt' }, this.backoff(receiveCount), { effectMayExist: true });
      }
    }

    let result: unknown;
    try {
      result = await handler.deliver(message, { signal });
    } catch (err) {
      const kind = signal.aborted ? 'uncertain' : classifyFailure(err);
      const error = toStoredError(err);
      this.logger.warn('outbox delivery failed', { ...log, failure: kind, error_code: error.code });
      if (kind === 'terminal') return this.settle(message, owner, { state: 'FAILED', error }, log);
      if (kind === 'transient') {
        await this.outbox.releaseDelivery(message.event_id, owner);
        return this.giveUpOrRetry(message, receiveCount, error, this.backoff(receiveCount));
      }
      // It may have happened: keep the claim until the downstream has had time to finish, then verify.
      const verifyAt = this.clock() + this.downstreamTimeoutMs;
      await this.outbox.deferDelivery(message.event_id, owner, verifyAt, error);
      return this.giveUpOrRetry(message, receiveCount, error, this.downstreamTimeoutMs, { effectMayExist: true });
    }
    return this.settle(message, owner, { state: 'DELIVERED', result }, log);
  }

  private async verifyEarlierAttempt(
    message: OutboxMessage,
    handler: DeliveryHandler,
    ctx: DeliveryContext,
    log: Record<string, unknown>,
  ): Promise<ReconcileFinding> {
    if (!handler.verify) {
      this.logger.warn('re-running an outbox delivery that cannot be verified', log);
      return { kind: 'absent' };
    }
    try {
      const finding = await handler.verify(message, ctx);
      this.logger.info('verified an earlier delivery attempt', { ...log, finding: finding.kind });
      return finding;
    } catch (err) {
      return { kind: 'unreachable', reason: (err as Error)?.message ?? 'verification failed' };
    }
  }

  private async settle(
    message: OutboxMessage,
    owner: string,
    outcome: { state: 'DELIVERED'; result: unknown } | { state: 'FAILED'; error: StoredError },
    log: Record<string, unknown>,
  ): Promise<ConsumeOutcome> {
    try {
      await this.outbox.settleDelivery(message.event_id, owner, outcome, this.clock());
    } catch (err) {
      // The effect happened (or was refused) but is not recorded: our claim stays until its lease passes, and the
      // next owner verifies. Keep the message so that someone does.
      const reason = err instanceof OwnershipLostError ? 'claim taken over' : 'settlement not written';
      this.logger.warn('could not settle an outbox delivery', { ...log, reason, error_name: (err as Error)?.name });
      return { kind: 'retry', delayMs: this.leaseMs, reason };
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
   * Leaves the message for another receive. On the last receive before the dead-letter queue, the event is marked
   * FAILED first (its claim is left as is, so a redrive from the DLQ can still deliver it exactly once), unless the
   * effect may exist: then FAILED could be false, so the event stays pending and the sweep sends it again, and the
   * next consumer verifies with the downstream before anything else.
   */
  private async giveUpOrRetry(
    message: OutboxMessage,
    receiveCount: number,
    error: StoredError,
    delayMs: number,
    options: { effectMayExist?: boolean } = {},
  ): Promise<ConsumeOutcome> {
    countForTool(MetricName.OutboxDeliveryRetries, message.tool);
    if (receiveCount >= this.maxReceiveCount && options.effectMayExist) {
      this.logger.warn('outbox message leaves for the dead-letter queue with its outcome unknown; the sweep sends it again', {
        event_id: message.event_id,
        tool: message.tool,
        tenant: message.tenant,
        key_hash: message.key_hash,
        error_code: error.code,
      });
    } else if (receiveCount >= this.maxReceiveCount) {
      const failed = await this.outbox.failEvent(
        message.event_id,
        { code: error.code, message: `${error.message} (gave up after ${receiveCount} attempts; the message is in the dead-letter queue)` },
        this.clock(),
      );
      if (failed) {
        countForTool(MetricName.OutboxDeliveryFailed, message.tool);
        this.logger.error('outbox event sent to the dead-letter queue', {
          event_id: message.event_id,
          tool: message.tool,
          tenant: message.tenant,
          key_hash: message.key_hash,
          error_code: error.code,
        });
      }
    }
    return { kind: 'retry', delayMs, reason: error.code };
  }

  private backoff(receiveCount: number): number {
    return Math.min(this.retryBaseMs * 2 ** Math.max(0, receiveCount - 1), MAX_RETRY_DELAY_MS);
  }
}

function toStoredError(err: unknown): StoredError {
  if (err instanceof ToolFailure) return { code: err.code, message: err.message };
  return { code: ErrorCode.INTERNAL_ERROR, message: 'the delivery failed unexpectedly' };
}
