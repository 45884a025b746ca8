import { consumerLambdaHandler } from 'idempotent-mcp/lambda';
import { loadReferenceConfig } from '../config';
import { referenceDeliveries } from '../tools/reference-deliveries';

/**
 * The reference endpoint's outbox consumer: the demo tools' emails and tickets. A team's endpoint bundles its own
 * deliveries module instead. The outbox queue's SQS event source (ReportBatchItemFailures) needs
 * sqs:ChangeMessageVisibility besides the usual receive/delete permissions: retries are delayed per message.
 */
export const handler = consumerLambdaHandler({ deliveries: referenceDeliveries(loadReferenceConfig()) });
