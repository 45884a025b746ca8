import { UncertainToolError } from 'idempotent-mcp/engine';
import { baseUrlOf, DownstreamErrorCode, failureForStatus, LookupFailedError, lookupJson, requestJson, type CallOptions } from './http';

export interface EmailMessage {
  to: string;
  subject: string;
  body: string;
}

export interface SentEmail {
  message_id: string;
}

export interface EmailSendOptions extends CallOptions {
  /** The outbox event id: a reference the provider keeps with the message (it does not deduplicate on it). */
  eventId: string;
  tenant: string;
}

/**
 * Sends one email. Neither SES nor the sandbox mailbox deduplicates; the outbox consumer's claim does.
 * `find` exists where the provider can be searched by our reference, so a send that may have happened is
 * verified before it is tried again; without it such a send is tried again (the crash window is the only way
 * that can duplicate an email).
 */
export interface EmailSender {
  send(message: EmailMessage, options: EmailSendOptions): Promise<SentEmail>;
  find?(eventId: string, call: CallOptions): Promise<SentEmail | undefined>;
}

const MAILBOX = 'the mailbox';

/** The sandbox mailbox: an HTTP mail API that stores a `reference` with each message and is searchable by it. */
export class MailboxEmailSender implements EmailSender {
  constructor(private readonly options: { baseUrl: string | undefined; from: string; timeoutMs: number }) {}

  async send(message: EmailMessage, options: EmailSendOptions): Promise<SentEmail> {
    const result = await requestJson(
      MAILBOX,
      `${baseUrlOf(MAILBOX, this.options.baseUrl)}/v1/messages`,
      {
        method: 'POST',
        body: { from: this.options.from, ...message, reference: options.eventId, metadata: { tenant: options.tenant } },
      },
      { signal: options.signal, timeoutMs: this.options.timeoutMs },
    );
    if (result.status === 200 || result.status === 201) {
      const id = (result.body as { message_id?: unknown } | undefined)?.message_id;
      if (typeof id === 'string') return { message_id: id };
      throw new UncertainToolError(DownstreamErrorCode.ERROR, `${MAILBOX} answered without a message id`);
    }
    throw failureForStatus(MAILBOX, result);
  }

  async find(eventId: string, call: CallOptions): Promise<SentEmail | undefined> {
    const url = `${baseUrlOf(MAILBOX, this.options.baseUrl)}/v1/messages?reference=${encodeURIComponent(eventId)}`;
    const result = await lookupJson(MAILBOX, url, { signal: call.signal, timeoutMs: this.options.timeoutMs });
    if (result.status !== 200) throw new LookupFailedError(MAILBOX, `HTTP ${result.status}`);
    const messages = (result.body as { messages?: { message_id?: unknown }[] } | undefined)?.messages;
    if (!Array.isArray(messages)) throw new LookupFailedError(MAILBOX, 'unreadable answer');
    const id = messages[0]?.message_id;
    return typeof id === 'string' ? { message_id: id } : undefined;
  }
}
