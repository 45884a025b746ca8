import { SQSClient } from '@aws-sdk/client-sqs';
import type { Clock } from '../core/clock';
import type { EmailSender } from '../downstream/email';
import { createEmailSender } from '../downstream/ses-email';
import { tools as registry } from '../mcp/tools';
import { isWriteTool, type ToolDefinition } from '../mcp/tool-types';
import { OutboxConsumer, type ConsumerOptions } from '../outbox/consumer';
import { createDeliveryHandlers } from '../outbox/deliveries';
import type { OutboxMessage } from '../outbox/outbox-event';
import { SqsEventPublisher, type EventPublisher } from '../outbox/publisher';
import { OutboxRelay, type RelayOptions } from '../outbox/relay';
import { Reconciler, type ReconcilerOptions, type ToolReconciler } from '../reconciler/reconciler';
import { FaultInjectingPublisher } from '../sandbox/queue-faults';
import { openSandboxStore } from '../sandbox/sandbox-store';
import { awsClientConfig } from '../store/clients';
import type { Services } from './services';

/** The background side of the service: the outbox relay, its consumer and the reconciler. */
export interface Workers {
  sqs: SQSClient;
  /** Undefined when OUTBOX_QUEUE_URL is not set. */
  queueUrl?: string;
  relay: OutboxRelay;
  consumer: OutboxConsumer;
  reconciler: Reconciler;
}

export interface WorkerOverrides {
  /** Write tools whose reconcile hooks the reconciler uses; the registry by default. */
  tools?: readonly ToolDefinition[];
  clock?: Clock;
  /** The consumer's email sender; the configured one (sandbox mailbox or SES) by default. */
  email?: EmailSender;
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
  let publisher: EventPublisher = queueUrl ? new SqsEventPublisher(sqs, queueUrl) : noQueue;
  const sandbox = openSandboxStore(services);
  if (sandbox) publisher = new FaultInjectingPublisher(publisher, sandbox);

  const relay = new OutboxRelay({ outbox: services.outbox, publisher, logger, clock, ...overrides.relay });
  const consumer = new OutboxConsumer({
    outbox: services.outbox,
    // Built here, not in the shared services: only the consumer sends email, so only worker bundles carry SES.
    handlers: createDeliveryHandlers({ tickets: services.downstreams.tickets, email: overrides.email ?? createEmailSender(sideEffects) }),
    logger,
    clock,
    downstreamTimeoutMs: sideEffects.downstreamTimeoutMs,
    maxReceiveCount: sideEffects.outboxMaxReceiveCount,
    ...overrides.consumer,
  });
  const reconcilers = new Map<string, ToolReconciler>();
  for (const tool of overrides.tools ?? registry) {
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
  return { sqs, queueUrl, relay, consumer, reconciler };
}
