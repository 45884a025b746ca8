import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import { createRelayHandler } from '../runtime/worker-events';
import { createWorkerServices } from '../runtime/worker-services';
import { createRelay } from '../runtime/workers';

/**
 * DynamoDB Streams on the table, filtered to INSERTs of this endpoint's outbox events (pk `<TABLE_KEY_PREFIX>OUTBOX#`,
 * sk = EVENT), with ReportBatchItemFailures.
 * The same function for every endpoint: it moves events to the queue and builds nothing else.
 */
export const handler = withMetrics(createRelayHandler(createRelay(createWorkerServices(loadWorkerConfig()))));
