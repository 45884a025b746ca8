import type { Clock } from '../core/clock';
import type { IdempotencyStore, RecordQueries } from '../engine/persistence';
import type { ReconcileServices, ToolDefinition, ToolRuntime } from '../mcp/tool-types';
import type { MetricsPublisher } from '../observability/metrics';
import type { OutboxRelay } from '../outbox/relay';
import { Reconciler, type ReconcilerConfig, type ReconcilerSettings, reconcilerTiming } from './reconciler';
import { toolReconcilers } from './tool-hooks';

/** What a reconciler is built from besides its configuration: where it reads and writes, and the tools' hooks. */
export interface ReconcilerParts<S extends ToolRuntime> {
  store: IdempotencyStore & RecordQueries;
  /** The write tools whose reconcile hooks settle their lost outcomes (the others' go to review). */
  tools: readonly ToolDefinition<S>[];
  /** What each hook gets: the reconciler's store, clock and logger plus the clients the tools module adds. */
  services: ReconcileServices<S>;
  logger: ReconcilerSettings['logger'];
  metrics?: MetricsPublisher;
  clock?: Clock;
  relay?: OutboxRelay;
  /** Settings over the configuration's and the defaults (the workers' overrides, `startReconciler`'s options). */
  settings?: Partial<
    Pick<
      ReconcilerSettings,
      'leaseGraceMs' | 'backoffBaseMs' | 'backoffMaxMs' | 'maxAttempts' | 'checkTimeoutMs' | 'outboxGraceMs' | 'batchSize'
    >
  >;
}

/** `value` without its undefined fields, so that an unset option never hides a default. */
function definedOnly<T extends object>(value: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(value ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The one way a reconciler is built from configuration: the Lambda workers (the endpoint's environment),
 * `startReconciler` (its options) and the gateway command (its environment) all come here, so each setting has one
 * default (`reconcilerTiming`, `ReconcilerDefaults`). Returns the period too: a caller that schedules runs uses it.
 */
export function reconcilerFromConfig<S extends ToolRuntime>(
  config: ReconcilerConfig,
  parts: ReconcilerParts<S>,
): { reconciler: Reconciler; periodMs: number } {
  const { periodMs, ...timing } = reconcilerTiming(definedOnly(config));
  const reconciler = new Reconciler({
    ...timing,
    ...definedOnly({ metrics: parts.metrics, clock: parts.clock, relay: parts.relay }),
    store: parts.store,
    tools: toolReconcilers(parts.tools, parts.services, timing.downstreamTimeoutMs),
    logger: parts.logger,
    ...definedOnly(parts.settings),
  });
  return { reconciler, periodMs };
}
