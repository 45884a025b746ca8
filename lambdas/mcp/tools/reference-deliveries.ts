import type { DeliveryHandler, Services } from 'idempotent-mcp/mcp';
import { createEmailSender } from '../../downstream/ses-email';
import { createDeliveryHandlers } from './deliveries';

/**
 * The reference endpoint's deliveries (the demo tools' emails and tickets) from its services. Apart from
 * ./deliveries so that only consumer code imports it: only the consumer's bundle carries the SES client.
 */
export function referenceDeliveries(services: Pick<Services, 'config' | 'downstreams'>): Record<string, DeliveryHandler> {
  return createDeliveryHandlers({ tickets: services.downstreams.tickets, email: createEmailSender(services.config.sideEffects) });
}
