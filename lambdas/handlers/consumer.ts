import { loadWorkerConfig } from '../config';
import { referenceDeliveries } from '../mcp/tools/reference-deliveries';
import { withMetrics } from '../observability/metrics';
import { createConsumerSqsHandler } from '../runtime/worker-handlers';
import { createWorkerServices } from '../runtime/worker-services';
import { createConsumer } from '../runtime/workers';

const services = createWorkerServices(loadWorkerConfig());

/**
 * The reference endpoint's outbox consumer: the demo tools' emails and tickets. A team's endpoint bundles its own
 * deliveries module instead (consumerLambdaHandler). The outbox queue's SQS event source (ReportBatchItemFailures)
 * needs sqs:ChangeMessageVisibility besides the usual receive/delete permissions: retries are delayed per message.
 */
export const handler = withMetrics(createConsumerSqsHandler(createConsumer(services, { deliveries: referenceDeliveries(services) }), services.logger));
