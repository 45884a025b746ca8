import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import { Construct } from 'constructs';
import { DEFAULT_RECONCILE_MAX_ATTEMPTS, DEFAULT_RECONCILE_PERIOD_MS, environmentOf } from '../../lambdas/config';
import type { IdempotencyTable, TableItemAction } from './idempotency-store';
import type { OutboxQueue } from './outbox-queue';
import { commonFunctionProps, downstreamTimeoutMs, ServiceFunction, type CommonFunctionProps } from './service-function';

/**
 * Props of `ReconcilerFunction`: its entry, the table, the outbox queue, its schedule and attempts, the function's settings.
 */
export interface ReconcilerFunctionProps extends CommonFunctionProps {
  /** The handler file to bundle: IdempotentMcpEndpoint generates one around your tools module. */
  readonly entry: string;
  readonly store: IdempotencyTable;
  /**
   * The sweep re-sends outbox events the stream relay missed.
   * @default none: the endpoint has no outbox (OUTBOX=off)
   */
  readonly queue?: OutboxQueue;
  /**
   * Bound of one reconcile check of a downstream (DOWNSTREAM_TIMEOUT_MS).
   * @default 3 seconds (the functions' own default)
   */
  readonly downstreamTimeout?: Duration;
  /**
   * How often it runs (at least 1 minute, the shortest EventBridge rate). The function gets it as
   * RECONCILE_INTERVAL_MS too: its retry backoff starts at one period, so a downstream outage is re-checked over
   * hours, not minutes, before a record is parked for review.
   * @default Duration.minutes(1)
   */
  readonly period?: Duration;
  /**
   * A run ends before the next one starts (overlaps would still be safe: every write is fenced).
   * @default Duration.seconds(50)
   */
  readonly timeout?: Duration;
  /**
   * Checks of an unreachable downstream before a record is parked as NEEDS_REVIEW (RECONCILE_MAX_ATTEMPTS).
   * @default 8
   */
  readonly maxAttempts?: number;
}

/**
 * How often the reconciler runs by default; `unknown` answers tell clients to retry after about this long.
 */
export const DEFAULT_RECONCILE_PERIOD = Duration.minutes(DEFAULT_RECONCILE_PERIOD_MS / 60_000);

/**
 * Settling a record (Update), releasing a confirmed-absent key (Delete), the outbox sweep's send bookkeeping
 * (Update) and reads of single items (Get). Its work list comes from Query on the attention index only.
 */
export const RECONCILER_TABLE_ACTIONS: TableItemAction[] = ['GetItem', 'UpdateItem', 'DeleteItem'];

/**
 * Finds UNKNOWN, stale PROCESSING and stuck outbox items through the sparse index, on a schedule.
 */
export class ReconcilerFunction extends Construct {
  readonly handler: ServiceFunction;
  readonly rule: events.Rule;

  constructor(scope: Construct, id: string, props: ReconcilerFunctionProps) {
    super(scope, id);
    const period = props.period ?? DEFAULT_RECONCILE_PERIOD;
    if (period.toMilliseconds() < DEFAULT_RECONCILE_PERIOD.toMilliseconds()) {
      throw new Error(`ReconcilerFunction: period must be at least 1 minute, EventBridge's shortest rate (got ${period.toHumanString()})`);
    }
    this.handler = new ServiceFunction(this, 'Handler', {
      ...commonFunctionProps(props),
      entry: props.entry,
      description: 'Reconciler: settles UNKNOWN and stale records, re-sends stuck outbox events',
      timeout: props.timeout ?? Duration.seconds(50),
      environment: {
        ...environmentOf({
          tableName: props.store.tableName,
          outboxQueueUrl: props.queue?.queue.queueUrl,
          outbox: props.queue ? undefined : 'off',
          reconcileIntervalMs: period.toMilliseconds(),
          reconcileMaxAttempts: props.maxAttempts ?? DEFAULT_RECONCILE_MAX_ATTEMPTS,
          downstreamTimeoutMs: downstreamTimeoutMs(props.downstreamTimeout),
        }),
      },
    });
    props.store.grantItems(this.handler.role, RECONCILER_TABLE_ACTIONS);
    props.store.grantAttentionQuery(this.handler.role);
    props.queue?.grantSend(this.handler.role);

    this.rule = new events.Rule(this, 'Schedule', {
      description: 'Runs the reconciler',
      schedule: events.Schedule.rate(period),
    });
    // A missed run is not retried: the next one a minute later does the same work.
    this.rule.addTarget(new targets.LambdaFunction(this.handler.function, { retryAttempts: 0, maxEventAge: Duration.minutes(1) }));
  }
}
