import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { DEFAULT_RECONCILE_MAX_ATTEMPTS, DEFAULT_RECONCILE_PERIOD_MS, type SideEffectsConfig } from '../config';
import { systemClock, type Clock } from '../core/clock';
import { ErrorCode } from '../core/errors';
import { absenceIsConclusive, DEFAULT_DOWNSTREAM_TIMEOUT_MS, decidableAt, inFlightUntil } from '../core/in-flight';
import { leaseHasPassed } from '../core/lease';
import { hashForLog } from '../core/idempotency-key';
import type { AbsentPolicy, ReconcileFinding, ReconcileRequest } from '../core/reconcile';
import type { IdempotencyRecord } from '../core/state-machine';
import { toolInFlightWindowMs } from '../core/tool-policy';
import type { IdempotencyStore, RecordQueries } from '../engine/persistence';
import type { ToolkitLogger } from '../observability/logger';
import { lambdaMetrics, MetricName, type MetricsPublisher } from '../observability/metrics';
import type { OutboxRelay } from '../outbox/relay';

/** What the reconciler needs from a write tool: how to ask its downstream, and what an absence means. */
export interface ToolReconciler {
  /** Without it the tool's lost outcomes cannot be verified and go straight to review. */
  reconcile?: (request: ReconcileRequest) => Promise<ReconcileFinding>;
  onAbsent: AbsentPolicy;
  /** The tool's in-flight window (`toolInFlightWindowMs`): before it passed, an absence decides nothing. */
  inFlightWindowMs: number;
}

/**
 * The reconciler class's settings, all resolved: what `startReconciler`'s options and the workers'
 * environment come to. Not public: a team configures the reconciler through those.
 */
export interface ReconcilerSettings {
  /** The store and its queries (the UNKNOWN records, the stale leases, the records parked for review). */
  store: IdempotencyStore & RecordQueries;
  tools: ReadonlyMap<string, ToolReconciler>;
  logger: Pick<ToolkitLogger, 'info' | 'warn' | 'error'>;
  /** Where its counts and gauges go. Default the Lambda functions' (EMF on standard output, see `lambdaMetrics`). */
  metrics?: MetricsPublisher;
  clock?: Clock;
  /** Sweeps stuck outbox events in the same run. */
  relay?: OutboxRelay;
  /** A PROCESSING record is stale this long after its lease passed (the executor's completion may be in flight), and one a follower marked UNKNOWN is not checked sooner. */
  leaseGraceMs?: number;
  /** First wait after an unreachable downstream, doubling per attempt (one reconciler period, `reconcilerTiming`). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Checks before a record goes to NEEDS_REVIEW. */
  maxAttempts?: number;
  /** Budget of one downstream check. */
  checkTimeoutMs?: number;
  /** Outbox events are swept this long after they were due (the stream relay goes first). */
  outboxGraceMs?: number;
  /** Records handled per run. */
  batchSize?: number;
  /** DOWNSTREAM_TIMEOUT_MS: the in-flight window of a record whose tool is not in `tools`, and the default `checkTimeoutMs`. Default 3000 ms. */
  downstreamTimeoutMs?: number;
}

/**
 * What one reconciler pass did: records found, released, failed, deferred, parked for review. The one report of the
 * reconciler wherever it runs: `startReconciler(...).runOnce()` in a server of your own, and the Lambda function's
 * handler (`reconcilerLambdaHandler`).
 * @public
 */
export interface ReconcileReport {
  /** UNKNOWN records the downstream has: now SUCCEEDED with its result. */
  found: number;
  /** UNKNOWN records confirmed absent and deleted: a retry with the key executes. */
  released: number;
  /** UNKNOWN records confirmed absent, of a tool with `onAbsent: 'fail'`: now FAILED. */
  failed: number;
  /**
   * UNKNOWN records left for a later check: the downstream could not answer, a request may still land, or the record
   * moved on meanwhile.
   */
  deferred: number;
  /** Records parked for a person by this run (checks exhausted, or a tool that cannot reconcile). */
  needsReviewNew: number;
  /** Stale PROCESSING records (their executor vanished) made UNKNOWN; checked from the next run on. */
  expiredLeases: number;
  /** UNKNOWN records left after this run, the age of the oldest, and the records parked for review. */
  unknown: number;
  /** Seconds since the last update of the oldest UNKNOWN record left; 0 when none. */
  oldestUnknownAgeSeconds: number;
  /** All records parked for review after this run, not only this run's. */
  needsReview: number;
  /** The outbox sweep of this run (events sent, resent, failed, abandoned), and the events still pending after it. */
  outbox?: { sent: number; resent: number; failed: number; abandoned: number };
  /** Outbox events still pending after the sweep; absent when this reconciler has no outbox. */
  outboxPending?: number;
}

/** Whether a run changed anything (runs that did not are logged at debug level only: they come every few seconds locally). */
function runActed(report: ReconcileReport): boolean {
  const { found, released, failed, deferred, needsReviewNew, expiredLeases, outbox } = report;
  return found + released + failed + deferred + needsReviewNew + expiredLeases + (outbox?.sent ?? 0) + (outbox?.abandoned ?? 0) > 0;
}

/** The log line of one run, the same for the Lambda function and a reconciler in a server of your own. */
export function logRun(logger: Pick<ToolkitLogger, 'info' | 'debug'>, report: ReconcileReport): ReconcileReport {
  if (runActed(report)) logger.info('reconciler run', { ...report });
  else logger.debug('reconciler run: nothing to do', { ...report });
  return report;
}

/** The defaults of the settings no configuration names (the ones it names: `reconcilerTiming`). */
const ReconcilerDefaults = {
  leaseGraceMs: 5_000,
  backoffMaxMs: 60 * 60_000,
  outboxGraceMs: 30_000,
  batchSize: 50,
} as const;

/**
 * What configures a reconciler: the endpoint's environment (`SideEffectsConfig`: RECONCILE_INTERVAL_MS,
 * RECONCILE_MAX_ATTEMPTS, DOWNSTREAM_TIMEOUT_MS) or `startReconciler`'s options; what is unset takes its one default.
 */
export type ReconcilerConfig = Partial<Pick<SideEffectsConfig, 'reconcileIntervalMs' | 'reconcileMaxAttempts' | 'downstreamTimeoutMs'>>;

/**
 * The settings a configuration gives, each with its one default: the period (a scheduled reconciler's,
 * `DEFAULT_RECONCILE_PERIOD_MS`) is also the first wait of the backoff, and a check of a downstream is one downstream
 * call, bounded by DOWNSTREAM_TIMEOUT_MS like every other.
 */
export function reconcilerTiming(
  config: ReconcilerConfig,
): { periodMs: number } & Required<Pick<ReconcilerSettings, 'backoffBaseMs' | 'maxAttempts' | 'checkTimeoutMs' | 'downstreamTimeoutMs'>> {
  const periodMs = config.reconcileIntervalMs ?? DEFAULT_RECONCILE_PERIOD_MS;
  const downstreamTimeoutMs = config.downstreamTimeoutMs ?? DEFAULT_DOWNSTREAM_TIMEOUT_MS;
  return {
    periodMs,
    backoffBaseMs: periodMs,
    maxAttempts: config.reconcileMaxAttempts ?? DEFAULT_RECONCILE_MAX_ATTEMPTS,
    checkTimeoutMs: downstreamTimeoutMs,
    downstreamTimeoutMs,
  };
}

const CONCURRENCY = 8;
/** UNKNOWN records read per run to find the oldest (they are few: each one is an incident being settled). */
const UNKNOWN_SCAN_LIMIT = 1000;

/**
 * Settles what the engine could not: UNKNOWN records (a timeout after the downstream may have acted), stale
 * PROCESSING records (an executor that vanished) and stuck outbox events, all found through the store's queries
 * (`RecordQueries`; on DynamoDB the sparse attention index). Each record gets one state transition per run, always through a conditional write fenced on what was
 * read, so the reconciler never races a live executor or a second reconciler.
 *
 *   UNKNOWN --found--> SUCCEEDED (the downstream's result; the next duplicate replays it)
 *           --absent or unreachable, inside the in-flight window--> UNKNOWN, next check at its end (not an attempt)
 *           --absent--> released (a retry executes) | FAILED (tool policy 'fail')
 *           --unreachable--> UNKNOWN, next check after base * 2^attempts --N attempts--> NEEDS_REVIEW
 *   PROCESSING, lease passed + grace --> UNKNOWN (checked from the next run on)
 *
 * Not public: `startReconciler` (a server of your own) and `reconcilerLambdaHandler` (the Lambda
 * function) build it.
 */
export class Reconciler {
  private readonly options: Required<Omit<ReconcilerSettings, 'relay'>> & Pick<ReconcilerSettings, 'relay'>;

  constructor(options: ReconcilerSettings) {
    options.store.assertQueryable('The reconciler');
    const { periodMs: _period, ...timing } = reconcilerTiming({ downstreamTimeoutMs: options.downstreamTimeoutMs });
    this.options = { clock: systemClock, metrics: lambdaMetrics, ...ReconcilerDefaults, ...timing, ...options };
  }

  nextCheckAfter(attempts: number): number {
    const { backoffBaseMs, backoffMaxMs } = this.options;
    return Math.min(backoffBaseMs * 2 ** Math.max(0, attempts - 1), backoffMaxMs);
  }

  /**
   * Whether an UNKNOWN record may be checked now: its next check came, and, when someone other than its executor
   * marked it (a follower the moment the lease passed), the lease passed with the grace too. Until then the
   * executor may still be finishing, and an `absent` answer could release a key whose effect is on its way. An
   * executor that marked its own record has stopped: it is checked at once.
   */
  isDue(record: IdempotencyRecord, now: number): boolean {
    if ((record.nextCheckAt ?? record.updatedAt) > now) return false;
    return record.errorType !== 'lease_expired' || leaseHasPassed(record.leaseExpiresAt + this.options.leaseGraceMs, now);
  }

  async runOnce(): Promise<ReconcileReport> {
    const { store, clock, batchSize, leaseGraceMs, relay, outboxGraceMs, metrics } = this.options;
    const report: ReconcileReport = {
      found: 0,
      released: 0,
      failed: 0,
      deferred: 0,
      needsReviewNew: 0,
      expiredLeases: 0,
      unknown: 0,
      oldestUnknownAgeSeconds: 0,
      needsReview: 0,
    };
    const now = clock();

    const unknown = await store.findAttention('UNKNOWN', { limit: UNKNOWN_SCAN_LIMIT });
    const due = unknown.filter((r) => this.isDue(r, now)).slice(0, batchSize);
    const settled = new Set<IdempotencyRecord>();
    await inBatches(due, CONCURRENCY, async (record) => {
      const outcome = await this.settleUnknown(record, now);
      report[outcome]++;
      if (outcome !== 'deferred') settled.add(record);
    });

    // Stale leases become UNKNOWN now and are checked from the next run on: one transition per record per run.
    const stale = (await store.findAttention('PROCESSING', { dueBy: now - leaseGraceMs, limit: batchSize })).filter((r) =>
      leaseHasPassed(r.leaseExpiresAt + leaseGraceMs, now),
    );
    for (const record of stale) {
      if (await this.expireLease(record, now)) {
        report.expiredLeases++;
        metrics.countForTool(MetricName.StuckProcessing, record.tool);
        this.options.logger.warn('stale PROCESSING record marked UNKNOWN', logFields(record));
      }
    }

    if (relay) {
      report.outbox = await relay.sweep({ graceMs: outboxGraceMs, limit: batchSize });
      report.outboxPending = await relay.pendingCount();
      metrics.add(MetricName.OutboxPending, MetricUnit.Count, report.outboxPending);
    }

    const remaining = unknown.filter((r) => !settled.has(r));
    report.unknown = remaining.length + report.expiredLeases;
    report.oldestUnknownAgeSeconds = Math.max(0, ...remaining.map((r) => Math.floor((now - r.updatedAt) / 1000)));
    report.needsReview = await store.countAttention('NEEDS_REVIEW');
    metrics.add(MetricName.UnknownRecords, MetricUnit.Count, report.unknown);
    metrics.add(MetricName.OldestUnknownAgeSeconds, MetricUnit.Seconds, report.oldestUnknownAgeSeconds);
    metrics.add(MetricName.NeedsReview, MetricUnit.Count, report.needsReview);
    return report;
  }

  /** The tool's in-flight window (the default one for a tool this reconciler does not know). */
  windowOf(tool: string): number {
    return this.options.tools.get(tool)?.inFlightWindowMs ?? toolInFlightWindowMs({}, this.options.downstreamTimeoutMs);
  }

  /**
   * A stale PROCESSING record to UNKNOWN: its executor vanished, and its requests, all sent before its lease ended,
   * may still land for the tool's window. Protected, as `settleUnknown`.
   */
  protected expireLease(record: IdempotencyRecord, now: number): Promise<boolean> {
    return this.options.store.expireLease(record, now, inFlightUntil(record.leaseExpiresAt, this.windowOf(record.tool)));
  }

  /**
   * Asks the tool's downstream and makes the one transition its answer calls for. Protected, not private: the race
   * exploration (test/proof) drives it one record at a time over the in-memory store.
   */
  protected async settleUnknown(
    record: IdempotencyRecord,
    now: number,
  ): Promise<'found' | 'released' | 'failed' | 'deferred' | 'needsReviewNew'> {
    const { store, logger, tools, checkTimeoutMs, maxAttempts, metrics } = this.options;
    const tool = tools.get(record.tool);
    const finding = await this.ask(record, tool, checkTimeoutMs);
    const log = { ...logFields(record), finding: finding.kind };
    if (finding.kind === 'found') {
      if (!(await store.reconcile(record, { event: 'reconciled_found', result: finding.result }, now))) return 'deferred';
      metrics.countForTool(MetricName.ReconciledSucceeded, record.tool);
      logger.info('reconciled: the downstream has the effect', log);
      return 'found';
    }
    // The lookup went out after `now`: once the window had passed at `now`, no request of the operation can land later.
    const decidable = decidableAt(record, this.windowOf(record.tool));
    if (!absenceIsConclusive(decidable, now)) {
      // A request may still land: nothing is released, failed or parked, and the attempt is not counted (the check
      // could not decide anything). The next one comes at the window's end.
      const message = `${finding.kind === 'absent' ? 'Not found yet' : finding.reason}; a request of this operation may still land until ${new Date(decidable).toISOString()}.`;
      await store.deferReconcile(record, decidable, { code: ErrorCode.OUTCOME_UNKNOWN, message }, now, { countsAsAttempt: false });
      logger.info('reconcile check deferred: inside the in-flight window', { ...log, decidable_at: new Date(decidable).toISOString() });
      return 'deferred';
    }
    if (finding.kind === 'absent') {
      if (tool?.onAbsent === 'fail') {
        const error = {
          code: ErrorCode.NOT_EXECUTED,
          message: 'The downstream confirms the operation did not happen; it will not be run again with this key.',
        };
        if (!(await store.reconcile(record, { event: 'reconciled_absent_fail', error }, now))) return 'deferred';
        metrics.countForTool(MetricName.ReconciledFailed, record.tool);
        logger.info('reconciled: absent, failed by policy', log);
        return 'failed';
      }
      if (!(await store.reconcile(record, { event: 'reconciled_absent' }, now))) return 'deferred';
      metrics.countForTool(MetricName.ReconciledReleased, record.tool);
      logger.info('reconciled: absent, key released', log);
      return 'released';
    }
    const attempts = (record.reconcileAttempts ?? 0) + 1;
    if (attempts >= maxAttempts || !tool?.reconcile) {
      const error = {
        code: ErrorCode.REVIEW_REQUIRED,
        message: tool?.reconcile
          ? `The outcome could not be verified after ${attempts} attempts and it may have taken effect; a person must check it. Do not retry, and do not send it again under a new key.`
          : 'This tool cannot verify a lost outcome, and it may have taken effect; a person must check it. Do not retry, and do not send it again under a new key.',
      };
      if (!(await store.reconcile(record, { event: 'reconcile_exhausted', error }, now))) return 'deferred';
      metrics.countForTool(MetricName.ReconcileExhausted, record.tool);
      logger.error('operation needs review: outcome could not be verified', { ...log, attempts, reason: finding.reason });
      return 'needsReviewNew';
    }
    await store.deferReconcile(
      record,
      now + this.nextCheckAfter(attempts),
      { code: ErrorCode.OUTCOME_UNKNOWN, message: finding.reason },
      now,
    );
    metrics.countForTool(MetricName.ReconcileDeferred, record.tool);
    logger.warn('reconcile check deferred: downstream unreachable', { ...log, attempts, reason: finding.reason });
    return 'deferred';
  }

  private async ask(record: IdempotencyRecord, tool: ToolReconciler | undefined, timeoutMs: number): Promise<ReconcileFinding> {
    if (!tool?.reconcile) return { kind: 'unreachable', reason: `no reconcile hook for tool ${record.tool}` };
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      return await tool.reconcile({ record, signal });
    } catch (err) {
      return { kind: 'unreachable', reason: signal.aborted ? 'the check timed out' : ((err as Error)?.message ?? 'the check failed') };
    }
  }
}

function logFields(record: IdempotencyRecord) {
  return { tool: record.tool, tenant: record.tenant, key_hash: hashForLog(record.idempotencyKey), attempts: record.reconcileAttempts ?? 0 };
}

async function inBatches<T>(items: T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(work));
}
