import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '@aws-lambda-powertools/logger';
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { createConsumerHandler, createReconcilerHandler } from '../runtime/worker-events';
import type { WorkerServices } from '../runtime/worker-services';
import type { Workers } from '../runtime/workers';

/**
 * Which of a local server's workers run, and how often the relay looks.
 */
export interface LocalWorkerOptions {
  /** The relay as a poller over the attention index (deployed: the DynamoDB Streams handler). Default on. */
  relayPoller?: boolean;
  /** The consumer as an SQS long-poller feeding the Lambda handler (deployed: the SQS event source). Default on. */
  consumerPoller?: boolean;
  /** The reconciler on a timer of RECONCILE_INTERVAL_MS (deployed: an EventBridge schedule). Default on. */
  reconcilerTimer?: boolean;
  /** How often the relay looks for committed events. Default 500 ms. */
  relayPollMs?: number;
}

export interface LocalWorkers {
  stop(): Promise<void>;
}

/** Waits `ms`, or less if the signal aborts (timers/promises removes its listener either way). */
const sleep = (ms: number, signal: AbortSignal) => delay(ms, undefined, { signal }).catch(() => {});

/** While a worker keeps failing (the store is down), one warning per this period, not one per run. */
export const FAILURE_WARNING_INTERVAL_MS = 30_000;

/** Runs `work` again `intervalMs` after each run ends (never overlapping) until stopped; failures are logged (rate-limited). */
function repeat(name: string, intervalMs: number, logger: Logger, work: (signal: AbortSignal) => Promise<void>) {
  const controller = new AbortController();
  let failing: { since: number; failures: number; warnedAt: number } | undefined;
  const loop = (async () => {
    while (!controller.signal.aborted) {
      // A signal per run: clients add a listener per request, which would pile up on one long-lived signal.
      const run = new AbortController();
      const abortRun = () => run.abort();
      controller.signal.addEventListener('abort', abortRun, { once: true });
      try {
        await work(run.signal);
        if (failing) logger.info(`${name} works again after ${failing.failures} failed runs`);
        failing = undefined;
      } catch (err) {
        const now = Date.now();
        failing ??= { since: now, failures: 0, warnedAt: -Infinity };
        failing.failures += 1;
        if (!controller.signal.aborted && now - failing.warnedAt >= FAILURE_WARNING_INTERVAL_MS) {
          failing.warnedAt = now;
          logger.warn(`${name} failed; trying again`, {
            error_name: (err as Error)?.name,
            failed_runs: failing.failures,
            failing_since: new Date(failing.since).toISOString(),
          });
        }
      } finally {
        controller.signal.removeEventListener('abort', abortRun);
      }
      await sleep(intervalMs, controller.signal);
    }
  })();
  return async () => {
    controller.abort();
    await loop;
  };
}

/** What the SQS event source mapping hands the Lambda: the same record shape, from a real ReceiveMessage. */
function toSqsRecord(message: {
  MessageId?: string;
  ReceiptHandle?: string;
  Body?: string;
  Attributes?: Record<string, string>;
  MD5OfBody?: string;
}): SQSRecord {
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: message.Attributes?.ApproximateReceiveCount ?? '1',
      SentTimestamp: message.Attributes?.SentTimestamp ?? '0',
      SenderId: message.Attributes?.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: message.Attributes?.ApproximateFirstReceiveTimestamp ?? '0',
    },
    messageAttributes: {},
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:local:000000000000:outbox',
    awsRegion: 'local',
  };
}

/**
 * The background workers on one machine, around the same handler functions Lambda runs: a relay poller, an SQS
 * consumer poller (receive, handler, delete what succeeded, as the event source mapping does) and the reconciler
 * timer. `npm start` and the tests run them; `stop` ends them all.
 */
export function startLocalWorkers(
  services: Pick<WorkerServices, 'config' | 'logger'>,
  workers: Workers,
  options: LocalWorkerOptions = {},
): LocalWorkers {
  const { logger } = services;
  const stops: Array<() => Promise<void>> = [];

  if (options.relayPoller ?? true) {
    // Events are due at commit; the stream relay's job. Sent events come back only when their next look is due.
    stops.push(repeat('outbox relay', options.relayPollMs ?? 500, logger, async () => void (await workers.relay.sweep({ graceMs: 0 }))));
  }

  if ((options.consumerPoller ?? true) && workers.queueUrl) {
    const queueUrl = workers.queueUrl;
    const handler = createConsumerHandler(workers, logger);
    stops.push(
      repeat('outbox consumer', 0, logger, async (signal) => {
        const { Messages } = await workers.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp', 'ApproximateFirstReceiveTimestamp'],
          }),
          { abortSignal: signal },
        );
        if (!Messages?.length) return;
        const event: SQSEvent = { Records: Messages.map(toSqsRecord) };
        const { batchItemFailures } = await handler(event);
        const failed = new Set(batchItemFailures.map((f) => f.itemIdentifier));
        const done = event.Records.filter((r) => !failed.has(r.messageId));
        if (done.length === 0) return;
        await workers.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
          }),
        );
      }),
    );
  }

  if (options.reconcilerTimer ?? true) {
    const handler = createReconcilerHandler(workers, logger);
    stops.push(repeat('reconciler', services.config.sideEffects.reconcileIntervalMs, logger, async () => void (await handler())));
  }

  return {
    async stop() {
      await Promise.all(stops.splice(0).map((stop) => stop()));
    },
  };
}
