import type { SideEffectsConfig } from '../config';
import { MailboxEmailSender, SesEmailSender, type EmailSender } from './email';
import { PaymentsClient } from './payments';
import { TicketsClient } from './tickets';

/** The clients of every system outside this service; built once per container. */
export interface Downstreams {
  payments: PaymentsClient;
  tickets: TicketsClient;
  email: EmailSender;
}

export function createDownstreams(config: SideEffectsConfig): Downstreams {
  const timeoutMs = config.downstreamTimeoutMs;
  return {
    payments: new PaymentsClient({ baseUrl: config.paymentsUrl, timeoutMs }),
    tickets: new TicketsClient({ baseUrl: config.ticketsUrl, timeoutMs }),
    email:
      config.emailMode === 'sandbox'
        ? new MailboxEmailSender({ baseUrl: config.mailboxUrl, from: config.emailFrom, timeoutMs })
        : new SesEmailSender({ from: config.emailFrom, timeoutMs }),
  };
}
