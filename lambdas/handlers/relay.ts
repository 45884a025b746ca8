import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import { createRelayStreamHandler } from '../runtime/worker-handlers';
import { createWorkers } from '../runtime/workers';

const services = createServices(loadWorkerConfig());

/** DynamoDB Streams on the table, filtered to INSERTs of outbox events (sk = EVENT), with ReportBatchItemFailures. */
export const handler = withMetrics(createRelayStreamHandler(createWorkers(services)));
