import { SQSClient } from '@aws-sdk/client-sqs';
import type { Clock } from '../core/clock';
import { isWriteTool, type ToolDefinition } from '../mcp/tool-types';
import { OutboxConsumer, type ConsumerOptions, type DeliveryHandler } from '../outbox/consumer';
import type { OutboxMessage } from '../outbox/outbox-event';
import { SqsEventPublisher, type EventPublisher } from '../outbox/publisher';
import { OutboxRelay, type RelayOptions } from '../outbox/relay';
import { Reconciler, type ReconcilerOptions, type ToolReconciler } from '../reconciler/reconciler';
import { awsClientConfig } from '../store/clients';
import type { Services } from './services';

/** The background side of the service: the outbox relay, its consumer and the reconciler. */
export interface Workers {
  sqs: SQSClient;
  /** Undefined when OUTBOX_QUEUE_URL is not set. */
  queueUrl?: string;
  /** Where the consumer moves a message whose delivery budget is spent. */
  deadLetterQueueUrl?: string;
  relay: OutboxRelay;
  consumer: OutboxConsumer;
  reconciler: Reconciler;
}

export interface WorkerOverrides {
  /** Write tools whose reconcile hooks the reconciler uses. Default none: their UNKNOWN records go to review. */
  tools?: readonly ToolDefinition[];
  /** Wraps the relay's queue publisher (the local sandbox injects queue faults this way). */
  wrapPublisher?: (publisher: EventPublisher) => EventPublisher;
  clock?: Clock;
  /**
   * How the consumer performs each outbox event type: the endpoint's own deliveries (a team's `deliveries` module,
   * the reference endpoint's emails and tickets). Default none: an event of a type without a handler is retried,
   * then dead-lettered, never dropped.
   */
  deliveries?: Readonly<Record<string, DeliveryHandler>>;
  relay?: Partial<Pick<RelayOptions, 'redeliverAfterMs' | 'maxSends'>>;
  consumer?: Partial<Pick<ConsumerOptions, 'retryBaseMs'>>;
  reconciler?: Partial<
    Pick<ReconcilerOptions, 'leaseGraceMs' | 'backoffBaseMs' | 'backoffMaxMs' | 'maxAttempts' | 'outboxGraceMs' | 'batchSize'>
  >;
}

/** Without a queue the relay keeps every event pending (and logs it), so nothing is lost once one is configured. */
const noQueue: EventPublisher = {
  publish: async (messages: OutboxMessage[]) => ({ failed: messages.map((m) => m.event_id) }),
};

/** Builds the workers from the services; the Lambda handlers and the local pollers share exactly these. */
export function createWorkers(services: Services, overrides: WorkerOverrides = {}): Workers {
  const { config, logger } = services;
  const clock = overrides.clock ?? services.clock;
  const sideEffects = config.sideEffects;
  const sqs = new SQSClient({ ...awsClientConfig(sideEffects.sqsEndpoint), maxAttempts: 3 });
  const queueUrl = sideEffects.outboxQueueUrl;
  const queuePublisher: EventPublisher = queueUrl ? new SqsEventPublisher(sqs, queueUrl) : noQueue;
  const publisher = overrides.wrapPublisher?.(queuePublisher) ?? queuePublisher;

  const relay = new OutboxRelay({ outbox: services.outbox, publisher, logger, clock, ...overrides.relay });
  const consumer = new OutboxConsumer({
    outbox: services.outbox,
    handlers: overrides.deliveries ?? {},
    logger,
    clock,
    downstreamTimeoutMs: sideEffects.downstreamTimeoutMs,
    deliveryBudgetMs: sideEffects.outboxDeliveryBudgetMs,
    ...overrides.consumer,
  });
  const reconcilers = new Map<string, ToolReconciler>();
  for (const tool of overrides.tools ?? []) {
    if (!isWriteTool(tool)) continue;
    const hook = tool.reconcile;
    reconcilers.set(tool.name, { onAbsent: tool.onAbsent, reconcile: hook && ((request) => hook(request, services)) });
  }
  const reconciler = new Reconciler({
    store: services.store,
    doc: services.doc,
    tableName: services.tableName,
    tools: reconcilers,
    logger,
    clock,
    relay,
    backoffBaseMs: sideEffects.reconcileIntervalMs,
    checkTimeoutMs: sideEffects.downstreamTimeoutMs,
    maxAttempts: sideEffects.reconcileMaxAttempts,
    ...overrides.reconciler,
  });
  return { sqs, queueUrl, deadLetterQueueUrl: sideEffects.outboxDeadLetterQueueUrl, relay, consumer, reconciler };
}
