import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import { createReconcilerHandler } from '../runtime/worker-handlers';
import { createWorkers } from '../runtime/workers';

const services = createServices(loadWorkerConfig());

/** EventBridge schedule (every minute): settles UNKNOWN and stale records, re-sends stuck outbox events. */
export const handler = withMetrics(createReconcilerHandler(createWorkers(services), services.logger));
