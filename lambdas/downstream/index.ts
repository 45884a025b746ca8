import type { SideEffectsConfig } from '../config';
import { PaymentsClient } from './payments';
import { TicketsClient } from './tickets';

/**
 * The clients of the systems the MCP tools and the reconciler call; built once per container. The email sender
 * is not among them: only the outbox consumer sends email (createEmailSender in ./ses-email, used by createWorkers).
 */
export interface Downstreams {
  payments: PaymentsClient;
  tickets: TicketsClient;
}

export function createDownstreams(config: SideEffectsConfig): Downstreams {
  const timeoutMs = config.downstreamTimeoutMs;
  return {
    payments: new PaymentsClient({ baseUrl: config.paymentsUrl, timeoutMs }),
    tickets: new TicketsClient({ baseUrl: config.ticketsUrl, timeoutMs }),
  };
}
