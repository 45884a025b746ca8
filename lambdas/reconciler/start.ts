import { systemClock, type Clock } from '../core/clock';
import type { ReconcileServices, ToolRuntime } from '../mcp/tool-types';
import type { ToolsModule } from '../mcp/tools-module';
import { stderrLogger, type ToolkitLogger } from '../observability/logger';
import { emfMetrics, type MetricsPublisher } from '../observability/metrics';
import type { IdempotencyStore, RecordQueries } from '../engine/persistence';
import { reconcilerFromConfig } from './from-config';
import { logRun, type ReconcileReport, type ReconcilerConfig } from './reconciler';

const noMetrics: MetricsPublisher = { add: () => {}, countForTool: () => {}, flush: () => {} };

/** What `metrics` takes besides `false`: `startReconciler`'s `{ namespace, write }`. */
type MetricsOptions = Exclude<ReconcilerOptions['metrics'], false | undefined>;
const METRICS_FIELDS: ReadonlySet<string> = new Set<keyof MetricsOptions>(['namespace', 'write']);

function publisherOf(metrics: ReconcilerOptions['metrics'], serviceName: string | undefined, logger: ToolkitLogger): MetricsPublisher {
  if (metrics === false) return noMetrics;
  // A publisher of your own (from JS, or through a cast) would be spread into the EMF options and ignored unseen.
  const unknown = typeof metrics === 'object' && metrics !== null ? Object.keys(metrics).filter((k) => !METRICS_FIELDS.has(k)) : [];
  if ((metrics !== undefined && (typeof metrics !== 'object' || metrics === null)) || unknown.length > 0) {
    throw new TypeError(
      `\`metrics\` takes false or { namespace, write }${unknown.length ? ` (not ${unknown.join(', ')})` : ''}: a publisher of your own is not taken; \`write\` sends each EMF line where you like`,
    );
  }
  return emfMetrics({ serviceName, logger, ...metrics });
}

/** Whether `store` has the queries the reconciler reads (`RecordQueries`) besides the record writes it settles with. */
function hasQueries(store: unknown): store is IdempotencyStore & RecordQueries {
  const s = store as Partial<Record<keyof (IdempotencyStore & RecordQueries), unknown>> | undefined;
  return (
    typeof s === 'object' &&
    s !== null &&
    typeof s.findAttention === 'function' &&
    typeof s.countAttention === 'function' &&
    typeof s.assertQueryable === 'function' &&
    typeof s.reconcile === 'function'
  );
}

/**
 * One pass of the reconciler over the store, built once: the tools module's `withClients` adds its clients to the
 * reconciler's services (the store, the clock, the logger), and each write tool's `reconcile(request, services)` asks
 * its downstream what became of an operation whose outcome was lost. `config` is the options' timing, or a
 * configuration's (the gateway command's environment).
 */
function reconcilerPass<S extends ToolRuntime>(
  config: ReconcilerConfig,
  options: ReconcilerRunOptions<S>,
): { pass: () => Promise<ReconcileReport>; logger: ToolkitLogger; periodMs: number } {
  if (!hasQueries(options?.store)) {
    throw new TypeError(
      'the reconciler needs `store`: the store your tool runtime writes to, with its queries (RecordQueries: DynamoDbIdempotencyStore, or InMemoryIdempotencyStore in a test)',
    );
  }
  if (!Array.isArray(options.tools)) throw new TypeError('the reconciler needs `tools`: the array of your tools module');
  if (options.withClients !== undefined && typeof options.withClients !== 'function') {
    throw new TypeError('`withClients` must be a function: function withClients(services) { return { ...services, yourClient } }');
  }
  const { store } = options;
  const logger = options.logger ?? stderrLogger({ serviceName: options.serviceName });
  const metrics = publisherOf(options.metrics, options.serviceName, logger);
  const clock = options.clock ?? systemClock;
  const base = { store, clock, logger };
  // What a hook gets: the tool's services without what only a request uses (ReconcileServices), i.e. this base and
  // the module's clients; the compiler cannot see that Omit<S, ...> is exactly that.
  const services = (options.withClients ? options.withClients(base) : base) as unknown as ReconcileServices<S>;
  const { reconciler, periodMs } = reconcilerFromConfig(config, {
    store,
    tools: options.tools,
    services,
    logger,
    metrics,
    clock,
    settings: { checkTimeoutMs: options.checkTimeoutMs, batchSize: options.batchSize },
  });
  const pass = async () => {
    try {
      return logRun(logger, await reconciler.runOnce());
    } finally {
      metrics.flush();
    }
  };
  return { pass, logger, periodMs };
}

/** The options' timing as a configuration: `reconcilerFromConfig` gives what is unset its one default. */
function configOf(options: ReconcilerOptions<ToolRuntime>): ReconcilerConfig {
  return {
    reconcileIntervalMs: options?.intervalMs,
    reconcileMaxAttempts: options?.maxAttempts,
    downstreamTimeoutMs: options?.downstreamTimeoutMs,
  };
}

/** A reconciler's options without its timing, which a configuration gives (`startReconcilerFromConfig`). */
type ReconcilerRunOptions<S extends ToolRuntime> = Omit<ReconcilerOptions<S>, 'intervalMs' | 'maxAttempts' | 'downstreamTimeoutMs'>;

/**
 * Runs the reconciler in this process: once at start (settling what an earlier process left), then `intervalMs`
 * after each run ends, so runs never overlap. A failed run (the store unreachable) is logged and the next one
 * tries again. Logs and metrics go to standard error unless you say otherwise, so a stdio MCP server keeps its
 * protocol channel clean. It needs your tools module's `tools` (and `withClients`) and the store; optionally where it
 * reports and its timing. It answers `runOnce()` (runs once now, after a run under way ends; the schedule goes on)
 * and `stop()` (stops the schedule and waits for a run under way: call it when your server shuts down, the timer
 * keeps the process alive).
 * @public
 */
export function startReconciler<S extends ToolRuntime>(
  options: Pick<ToolsModule<S>, 'tools' | 'withClients'> & {
    /**
     * The store your tool runtime writes to, with its queries (`RecordQueries`): the reconciler finds lost outcomes
     * through them and settles them there. `DynamoDbIdempotencyStore` (its attention index), or
     * `InMemoryIdempotencyStore` in a test.
     */
    store: IdempotencyStore & RecordQueries;
    /**
     * Time between runs, and the first wait before a downstream that did not answer is asked again (doubling per
     * attempt). Default one minute, the deployed schedule's period.
     */
    intervalMs?: number;
    /**
     * Where it logs: anything with `console`'s `debug`, `info`, `warn` and `error` (Powertools' `Logger`, pino, a
     * message and fields of your own). Default JSON lines on standard error; never standard output.
     */
    logger?: Pick<Console, 'debug' | 'info' | 'warn' | 'error'>;
    /** The `service` of its log lines and metrics. Default POWERTOOLS_SERVICE_NAME, else `idempotent-mcp`. */
    serviceName?: string;
    /**
     * Its metrics (unknown records, the oldest one's age, records parked for review, settlements per tool): CloudWatch
     * EMF lines on standard error by default; `{ namespace, write }` to name the namespace (default
     * POWERTOOLS_METRICS_NAMESPACE, else `IdempotentMcp`) or write each line elsewhere, or `false` for none.
     */
    metrics?: false | { namespace?: string; write?: (line: string) => void };
    /** Checks of an unreachable downstream before the record goes to NEEDS_REVIEW for a person. Default 8. */
    maxAttempts?: number;
    /** Budget of one reconcile hook call (its `signal` aborts after it). Default `downstreamTimeoutMs`. */
    checkTimeoutMs?: number;
    /** Records handled per run. Default 50. */
    batchSize?: number;
    /**
     * The bound of your downstream calls: with each tool's execution timeout it gives the tool's in-flight window
     * unless the tool sets `idempotency.inFlightWindowMs`. Give your tool runtime's engine the same
     * (`createToolRuntime({ engine: { downstreamTimeoutMs } })`). Default 3000 ms.
     */
    downstreamTimeoutMs?: number;
    clock?: Clock;
  },
): { runOnce(): Promise<ReconcileReport>; stop(): Promise<void> } {
  return startReconcilerFromConfig(configOf(options as ReconcilerOptions<ToolRuntime>), options);
}

/** What the reconciler of a server of your own needs (`startReconciler`'s options). */
type ReconcilerOptions<S extends ToolRuntime = ToolRuntime> = Parameters<typeof startReconciler<S>>[0];

/** A reconciler running on a schedule in this process (what `startReconciler` answers). */
type RunningReconciler = ReturnType<typeof startReconciler>;

/**
 * `startReconciler` with its timing from a configuration (the gateway command's environment: RECONCILE_INTERVAL_MS,
 * RECONCILE_MAX_ATTEMPTS, DOWNSTREAM_TIMEOUT_MS), through the same builder as the Lambda workers.
 */
export function startReconcilerFromConfig<S extends ToolRuntime>(
  config: ReconcilerConfig,
  options: ReconcilerRunOptions<S>,
): RunningReconciler {
  const { pass, logger, periodMs: intervalMs } = reconcilerPass(config, options);
  if (!Number.isFinite(intervalMs) || intervalMs <= 0) throw new TypeError('intervalMs must be a positive number of milliseconds');
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<unknown> = Promise.resolve();
  const runOnce = () => {
    const run = current.then(pass);
    current = run.catch(() => undefined);
    return run;
  };
  const tick = async () => {
    try {
      await runOnce();
    } catch (err) {
      logger.error('reconciler run failed; the next run tries again', {
        error_name: (err as Error)?.name,
        error_message: (err as Error)?.message,
      });
    }
    if (!stopped) timer = setTimeout(tick, intervalMs);
  };
  timer = setTimeout(tick, 0);
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await current;
    },
  };
}
