import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { EngineEvent, EngineEventType, IdempotencyObserver } from '../engine/observer';
import { EnvVars } from '../config';
import { read } from '../env-var';
import { logger as defaultLogger, stderrLogger, type ToolkitLogger } from './logger';
import type { Logger } from '@aws-lambda-powertools/logger';

const METRICS_NAMESPACE = read(process.env, EnvVars.powertoolsMetricsNamespace);

/**
 * The one Metrics instance (CloudWatch EMF on stdout). Disabled by POWERTOOLS_METRICS_DISABLED=true
 * or POWERTOOLS_DEV=true, which `npm start` and the tests set.
 */
const metrics = new Metrics({
  namespace: METRICS_NAMESPACE,
  serviceName: read(process.env, EnvVars.powertoolsServiceName),
});

/**
 * Metric names are a contract with the CDK alarms and dashboard.
 *
 * @public
 */
export const MetricName = {
  Executions: 'Executions',
  Replays: 'Replays',
  ReplayLatency: 'ReplayLatency',
  Conflicts: 'Conflicts',
  InProgressTimeouts: 'InProgressTimeouts',
  UnknownOutcomes: 'UnknownOutcomes',
  Released: 'ReleasedKeys',
  TerminalFailures: 'TerminalFailures',
  ReviewRequired: 'ReviewRequired',
  LeaseTakeovers: 'LeaseTakeovers',
  FencedCompletions: 'FencedCompletions',
  StoreUnavailable: 'StoreUnavailable',
  /** Downstream answered "already processed with this key": our key saved a duplicate. */
  DownstreamDuplicateRejections: 'DownstreamDuplicateRejections',
  /** Reconciler gauges and counts (service dimension only: the alarms read these). */
  NeedsReview: 'NeedsReview',
  OldestUnknownAgeSeconds: 'OldestUnknownAgeSeconds',
  UnknownRecords: 'UnknownRecords',
  StuckProcessing: 'StuckProcessing',
  ReconciledSucceeded: 'ReconciledSucceeded',
  ReconciledReleased: 'ReconciledReleased',
  ReconciledFailed: 'ReconciledFailed',
  OutboxResent: 'OutboxResent',
  OutboxDuplicateDeliveries: 'OutboxDuplicateDeliveries',
  /** Outbox events: first sends by the relay, effects delivered, deliveries given up (FAILED), retries of a delivery. */
  OutboxSent: 'OutboxSent',
  OutboxDelivered: 'OutboxDelivered',
  OutboxDeliveryFailed: 'OutboxDeliveryFailed',
  OutboxDeliveryRetries: 'OutboxDeliveryRetries',
  /** Reconciler: events still pending (gauge), checks that found the downstream unreachable, records sent to review. */
  OutboxPending: 'OutboxPending',
  ReconcileDeferred: 'ReconcileDeferred',
  ReconcileExhausted: 'ReconcileExhausted',
  /** The review tool (`npm run ops`): decisions written, decisions refused because the record moved meanwhile, redriven messages. */
  ReviewDecisions: 'ReviewDecisions',
  ReviewRaces: 'ReviewRaces',
  Redriven: 'Redriven',
} as const;
/**
 * One of the `MetricName` values: the name of a metric the endpoint writes.
 * @public
 */
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

const EVENT_METRIC: Record<EngineEventType, MetricName> = {
  executed: MetricName.Executions,
  replayed: MetricName.Replays,
  conflict: MetricName.Conflicts,
  in_progress: MetricName.InProgressTimeouts,
  unknown: MetricName.UnknownOutcomes,
  released: MetricName.Released,
  failed: MetricName.TerminalFailures,
  review_required: MetricName.ReviewRequired,
  taken_over: MetricName.LeaseTakeovers,
  ownership_lost: MetricName.FencedCompletions,
  store_unavailable: MetricName.StoreUnavailable,
};

/**
 * Publishes each metric at once and drops its `tool` dimension after it. One for the process: `singleMetric()` builds
 * a whole Metrics instance (environment reads, a Console) on every call, i.e. on every request.
 */
let perToolMetric: Metrics | undefined;

/**
 * Counts a per-tool event now (its own EMF line, so tools in one invocation never share dimensions).
 *
 * @public
 */
export function countForTool(
  name: MetricName,
  tool: string,
  value = 1,
  unit: (typeof MetricUnit)[keyof typeof MetricUnit] = MetricUnit.Count,
): void {
  perToolMetric ??= metrics.singleMetric();
  perToolMetric.addDimension('tool', tool);
  perToolMetric.addMetric(name, unit, value);
}

/** A CloudWatch metric unit (`Count`, `Seconds`, ...): `countForTool`'s `unit`. */
type MetricUnitName = NonNullable<Parameters<typeof countForTool>[3]>;

/**
 * Where a worker's counts and gauges go: CloudWatch EMF on standard output in the Lambda functions
 * (`lambdaMetrics`), EMF lines on standard error or anywhere else in a server of your own (`emfMetrics`).
 */
export interface MetricsPublisher {
  /** A count or gauge of the service (no tool dimension), kept until `flush()`. */
  add(name: MetricName, unit: MetricUnitName, value: number): void;
  /** A count for one tool (dimension `tool`), written at once. */
  countForTool(name: MetricName, tool: string, value?: number, unit?: MetricUnitName): void;
  /** Writes what `add` kept. */
  flush(): void;
}

/** The Lambda functions' publisher: the process's Metrics instance (flushed after each invocation by `withMetrics`). */
export const lambdaMetrics: MetricsPublisher = {
  add: (name, unit, value) => metrics.addMetric(name, unit, value),
  countForTool,
  flush: () => {
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  },
};

/**
 * Where the default metrics go: their CloudWatch namespace and service, the writer of their EMF lines, a logger.
 */
export interface EmfMetricsOptions {
  /** CloudWatch namespace. Default POWERTOOLS_METRICS_NAMESPACE, else `IdempotentMcp`. */
  namespace?: string;
  /** The `service` dimension. Default POWERTOOLS_SERVICE_NAME, else `idempotent-mcp`. */
  serviceName?: string;
  /** Where each EMF line goes. Default standard error (standard output is a stdio MCP server's protocol channel). */
  write?: (line: string) => void;
  /** Where Powertools' own warnings go. Default a stderr logger. */
  logger?: ToolkitLogger;
}

/**
 * Metrics as CloudWatch EMF JSON lines written where you say (standard error by default), for a server of your own.
 * Powertools builds the EMF documents; only where they are written differs from `lambdaMetrics`.
 */
export function emfMetrics(options: EmfMetricsOptions = {}): MetricsPublisher {
  const config = {
    namespace: options.namespace ?? METRICS_NAMESPACE,
    serviceName: options.serviceName ?? read(process.env, EnvVars.powertoolsServiceName),
    logger: options.logger ?? stderrLogger({ serviceName: options.serviceName }),
  };
  const write = options.write ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const service = new Metrics(config);
  const perTool = new Metrics(config);
  const emit = (instance: Metrics) => {
    if (!instance.hasStoredMetrics()) return;
    try {
      write(JSON.stringify(instance.serializeMetrics()));
    } finally {
      instance.clearMetrics();
      instance.clearDimensions();
    }
  };
  return {
    add: (name, unit, value) => service.addMetric(name, unit, value),
    countForTool(name, tool, value = 1, unit = MetricUnit.Count) {
      perTool.addDimension('tool', tool);
      perTool.addMetric(name, unit, value);
      emit(perTool);
    },
    flush: () => emit(service),
  };
}

/** Engine events become per-tool metrics and one structured log line (key hashed, no arguments). */
export function createEngineObserver(log: Logger = defaultLogger): IdempotencyObserver {
  return {
    record(event: EngineEvent) {
      countForTool(EVENT_METRIC[event.type], event.tool);
      if (event.type === 'replayed') countForTool(MetricName.ReplayLatency, event.tool, event.durationMs, MetricUnit.Milliseconds);
      const line = {
        idempotency_event: event.type,
        tool: event.tool,
        tenant: event.tenant,
        key_hash: event.keyHash,
        duration_ms: event.durationMs,
        ...(event.errorCode ? { error_code: event.errorCode } : {}),
      };
      if (event.type === 'unknown' || event.type === 'store_unavailable' || event.type === 'ownership_lost')
        log.warn('idempotency outcome needs attention', line);
      else log.info('idempotency event', line);
    },
  };
}

/**
 * Wraps a Lambda handler so buffered metrics are flushed after every invocation.
 */
export function withMetrics<E, C, R>(handler: (event: E, context: C) => Promise<R>): (event: E, context: C) => Promise<R> {
  return async (event, context) => {
    try {
      return await handler(event, context);
    } finally {
      if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
    }
  };
}
