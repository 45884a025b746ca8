import { SQSClient } from '@aws-sdk/client-sqs';
import type { SideEffectsConfig } from '../config';
import type { Clock } from '../core/clock';
import type { ToolDefinition } from '../mcp/tool-types';
import { OutboxConsumer, type ConsumerOptions, type DeliveryHandler } from '../outbox/consumer';
import type { OutboxMessage } from '../outbox/outbox-event';
import { SqsEventPublisher, type EventPublisher } from '../outbox/publisher';
import { OutboxRelay, type RelayOptions } from '../outbox/relay';
import { reconcilerFromConfig } from '../reconciler/from-config';
import type { Reconciler, ReconcileReport } from '../reconciler/reconciler';
import { awsClientConfig } from '../store/clients';
import type { WorkerServices } from './worker-services';

/**
 * The outbox queue as the workers reach it: its client and addresses (the queue itself is the `OutboxQueue` construct).
 */
export interface OutboxQueueClient {
  sqs: SQSClient;
  /** Undefined when OUTBOX_QUEUE_URL is not set. */
  queueUrl?: string;
  /** Where the consumer moves a message whose delivery budget is spent. */
  deadLetterQueueUrl?: string;
}

/**
 * The background side of the service: the outbox relay, its consumer and the reconciler.
 */
export interface Workers extends OutboxQueueClient {
  relay: OutboxRelay;
  consumer: OutboxConsumer;
  /** One reconciler run (its schedule is the caller's: the Lambda function's EventBridge rule, `npm start`'s timer). */
  reconciler: { runOnce(): Promise<ReconcileReport> };
}

/** What each worker uses of the workers' services. */
export type RelayServices = Pick<WorkerServices, 'config' | 'outbox' | 'logger' | 'clock'>;
export type ConsumerServices = Pick<WorkerServices, 'config' | 'outbox' | 'logger' | 'clock'>;
/**
 * The part of the worker services the reconciler uses.
 */
export type ReconcilerServices = Pick<WorkerServices, 'config' | 'outbox' | 'logger' | 'clock' | 'store' | 'doc' | 'tableName'>;

/**
 * What `createWorkers` takes for the outbox relay instead of its defaults.
 */
export interface RelayOverrides {
  /** Wraps the relay's queue publisher (the local sandbox injects queue faults this way). */
  wrapPublisher?: (publisher: EventPublisher) => EventPublisher;
  clock?: Clock;
  relay?: Partial<Pick<RelayOptions, 'redeliverAfterMs' | 'maxSends'>>;
}

/**
 * What `createWorkers` takes for the outbox consumer instead of its defaults.
 */
export interface ConsumerOverrides {
  /**
   * How the consumer performs each outbox event type: the endpoint's own deliveries (a team's `deliveries` module,
   * the reference endpoint's emails and tickets). Default none: an event of a type without a handler is retried,
   * then dead-lettered, never dropped.
   */
  deliveries?: Readonly<Record<string, DeliveryHandler>>;
  clock?: Clock;
  consumer?: Partial<Pick<ConsumerOptions, 'retryBaseMs'>>;
}

/**
 * What `createWorkers` takes for the reconciler instead of its defaults.
 */
export interface ReconcilerOverrides extends RelayOverrides {
  /**
   * Write tools whose reconcile hooks the reconciler uses. Default none: their UNKNOWN records go to review. Each
   * hook gets the services passed to the factory: give them the clients the tools' hooks call.
   */
  tools?: readonly ToolDefinition[];
  /** The reconciler's timing, over the environment's (RECONCILE_INTERVAL_MS, RECONCILE_MAX_ATTEMPTS) and its own defaults. */
  reconciler?: {
    /** A PROCESSING record is stale this long after its lease passed. */
    leaseGraceMs?: number;
    /** First wait after an unreachable downstream, doubling per attempt. */
    backoffBaseMs?: number;
    /** The longest wait between two checks of one record. */
    backoffMaxMs?: number;
    /** Checks of an unreachable downstream before the record goes to NEEDS_REVIEW. */
    maxAttempts?: number;
    /** Outbox events are swept this long after they were due (the stream relay goes first). */
    outboxGraceMs?: number;
    /** Records handled per run. */
    batchSize?: number;
  };
}

/**
 * What `createWorkers` takes instead of its defaults: the tools, the deliveries, and each worker's overrides.
 */
export type WorkerOverrides = RelayOverrides & ConsumerOverrides & ReconcilerOverrides;

/** Without a queue the relay keeps every event pending (and logs it), so nothing is lost once one is configured. */
const noQueue: EventPublisher = {
  publish: async (messages: OutboxMessage[]) => ({ failed: messages.map((m) => m.event_id) }),
};

function outboxQueue(sideEffects: SideEffectsConfig): OutboxQueueClient {
  return {
    sqs: new SQSClient({ ...awsClientConfig(sideEffects.sqsEndpoint), maxAttempts: 3 }),
    queueUrl: sideEffects.outboxQueueUrl,
    deadLetterQueueUrl: sideEffects.outboxDeadLetterQueueUrl,
  };
}

function relayOn(queue: OutboxQueueClient, services: RelayServices, overrides: RelayOverrides): OutboxRelay {
  const queuePublisher: EventPublisher = queue.queueUrl ? new SqsEventPublisher(queue.sqs, queue.queueUrl) : noQueue;
  const publisher = overrides.wrapPublisher?.(queuePublisher) ?? queuePublisher;
  const clock = overrides.clock ?? services.clock;
  return new OutboxRelay({ outbox: services.outbox, publisher, logger: services.logger, clock, ...overrides.relay });
}

function consumerOf(services: ConsumerServices, overrides: ConsumerOverrides): OutboxConsumer {
  const { sideEffects } = services.config;
  return new OutboxConsumer({
    outbox: services.outbox,
    handlers: overrides.deliveries ?? {},
    logger: services.logger,
    clock: overrides.clock ?? services.clock,
    downstreamTimeoutMs: sideEffects.downstreamTimeoutMs,
    deliveryBudgetMs: sideEffects.outboxDeliveryBudgetMs,
    ...overrides.consumer,
  });
}

function reconcilerOf(services: ReconcilerServices, relay: OutboxRelay, overrides: ReconcilerOverrides): Reconciler {
  return reconcilerFromConfig(services.config.sideEffects, {
    store: services.store,
    tools: overrides.tools ?? [],
    services,
    logger: services.logger,
    clock: overrides.clock ?? services.clock,
    relay,
    settings: overrides.reconciler,
  }).reconciler;
}

/** The relay alone (the DynamoDB Streams function): the outbox and the queue, nothing else. */
export function createRelay(services: RelayServices, overrides: RelayOverrides = {}): OutboxQueueClient & Pick<Workers, 'relay'> {
  const queue = outboxQueue(services.config.sideEffects);
  return { ...queue, relay: relayOn(queue, services, overrides) };
}

/** The consumer alone (the SQS function): the outbox, the queue and the endpoint's deliveries. */
export function createConsumer(
  services: ConsumerServices,
  overrides: ConsumerOverrides = {},
): OutboxQueueClient & Pick<Workers, 'consumer'> {
  return { ...outboxQueue(services.config.sideEffects), consumer: consumerOf(services, overrides) };
}

/**
 * The reconciler (the scheduled function), with the relay it re-sends stuck outbox events through. `services` is
 * also what the tools' reconcile hooks get: the workers' services plus the clients those hooks call.
 */
export function createReconciler(
  services: ReconcilerServices,
  overrides: ReconcilerOverrides = {},
): OutboxQueueClient & Pick<Workers, 'relay' | 'reconciler'> {
  const { relay, ...queue } = createRelay(services, overrides);
  return { ...queue, relay, reconciler: reconcilerOf(services, relay, overrides) };
}

/**
 * All three on one queue client: the local pollers of `npm start` run exactly the Lambda handlers' workers.
 */
export function createWorkers(services: WorkerServices, overrides: WorkerOverrides = {}): Workers {
  const queue = outboxQueue(services.config.sideEffects);
  const relay = relayOn(queue, services, overrides);
  return { ...queue, relay, consumer: consumerOf(services, overrides), reconciler: reconcilerOf(services, relay, overrides) };
}
