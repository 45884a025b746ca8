import { loadReferenceConfig } from './config';
import { referenceDeliveries } from './tools/reference-deliveries';

/**
 * The reference endpoint's deliveries module (IdempotentMcpEndpoint `deliveries`): the demo tools' emails and
 * tickets, their clients built once per container from the reference settings.
 */
export const deliveries = referenceDeliveries(loadReferenceConfig());
