import type { ReferenceConfig } from '../config';
import { PaymentsClient } from './payments';
import { TicketsClient } from './tickets';

/**
 * The reference endpoint's downstream clients, each built only where it is called: the payments provider by the MCP
 * function and the reconciler (request_payment and its reconcile hook, reference/tools/services.ts), the ticket
 * system and the email sender by the outbox consumer (reference/tools/reference-deliveries.ts).
 */
export function createPaymentsClient(config: ReferenceConfig): PaymentsClient {
  return new PaymentsClient({ baseUrl: config.paymentsUrl, timeoutMs: config.downstreamTimeoutMs });
}

export function createTicketsClient(config: ReferenceConfig): TicketsClient {
  return new TicketsClient({ baseUrl: config.ticketsUrl, timeoutMs: config.downstreamTimeoutMs });
}
