import type { DeliveryHandler } from 'idempotent-mcp/mcp';
import type { ReferenceConfig } from '../config';
import { createTicketsClient } from '../downstream';
import { MailboxEmailSender, type EmailSender } from '../downstream/email';
import { SesEmailSender } from '../downstream/ses-email';
import { createDeliveryHandlers } from './deliveries';

/**
 * The reference endpoint's email sender: the sandbox mailbox (EMAIL_MODE=sandbox, `npm start`, the deployed demo),
 * or SES. The choice is the reference endpoint's: a team's consumer delivers through its own deliveries module.
 */
function createEmailSender(config: ReferenceConfig): EmailSender {
  const timeoutMs = config.downstreamTimeoutMs;
  return config.emailMode === 'sandbox'
    ? new MailboxEmailSender({ baseUrl: config.mailboxUrl, from: config.emailFrom, timeoutMs })
    : new SesEmailSender({ from: config.emailFrom, timeoutMs });
}

/**
 * The reference endpoint's deliveries (the demo tools' emails and tickets), with the clients they call. Apart from
 * ./deliveries so that only consumer code imports it: only the consumer's bundle carries the SES client.
 */
export function referenceDeliveries(config: ReferenceConfig): Record<string, DeliveryHandler> {
  return createDeliveryHandlers({ tickets: createTicketsClient(config), email: createEmailSender(config) });
}
