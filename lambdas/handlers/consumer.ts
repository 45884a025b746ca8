import { createEmailSender } from '../downstream/ses-email';
import { loadWorkerConfig } from '../config';
import { createDeliveryHandlers } from '../mcp/tools/deliveries';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import { createConsumerSqsHandler } from '../runtime/worker-handlers';
import { createWorkers } from '../runtime/workers';

const services = createServices(loadWorkerConfig());
// Built here, not in the shared services: only the consumer sends email, so only its bundle carries SES.
const deliveries = createDeliveryHandlers({ tickets: services.downstreams.tickets, email: createEmailSender(services.config.sideEffects) });

/**
 * The reference endpoint's outbox consumer: the demo tools' emails and tickets. A team's endpoint bundles its own
 * deliveries module instead (consumerLambdaHandler). The outbox queue's SQS event source (ReportBatchItemFailures)
 * needs sqs:ChangeMessageVisibility besides the usual receive/delete permissions: retries are delayed per message.
 */
export const handler = withMetrics(createConsumerSqsHandler(createWorkers(services, { deliveries }), services.logger));
