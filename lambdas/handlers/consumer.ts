import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import { createConsumerSqsHandler } from '../runtime/worker-handlers';
import { createWorkers } from '../runtime/workers';

const services = createServices(loadWorkerConfig());

/**
 * The outbox queue's SQS event source (ReportBatchItemFailures). Needs sqs:ChangeMessageVisibility besides the
 * usual receive/delete permissions: retries are delayed per message.
 */
export const handler = withMetrics(createConsumerSqsHandler(createWorkers(services), services.logger));
