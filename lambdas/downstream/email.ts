import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2';
import { TerminalToolError, TransientToolError, UncertainToolError } from '../core/errors';
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

const SES = 'SES';
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
/** Throttling and quota: SES refused before sending. */
const SES_TRANSIENT = new Set(['TooManyRequestsException', 'LimitExceededException', 'ThrottlingException']);

/** SES v2 `SendEmail`, with the event id as a message tag (visible in SES event publishing). */
export class SesEmailSender implements EmailSender {
  private readonly client: SESv2Client;

  constructor(private readonly options: { from: string; timeoutMs: number; client?: SESv2Client }) {
    // No SDK retries: a retried send after a lost answer would be a second email.
    this.client = options.client ?? new SESv2Client({ maxAttempts: 1 });
  }

  async send(message: EmailMessage, options: EmailSendOptions): Promise<SentEmail> {
    const signal = AbortSignal.any([options.signal, AbortSignal.timeout(this.options.timeoutMs)]);
    try {
      const out = await this.client.send(
        new SendEmailCommand({
          FromEmailAddress: this.options.from,
          Destination: { ToAddresses: [message.to] },
          Content: { Simple: { Subject: { Data: message.subject }, Body: { Text: { Data: message.body } } } },
          EmailTags: [{ Name: 'event_id', Value: options.eventId }],
        }),
        { abortSignal: signal },
      );
      if (!out.MessageId) throw new UncertainToolError(DownstreamErrorCode.ERROR, 'SES answered without a message id');
      return { message_id: out.MessageId };
    } catch (err) {
      throw classifySesError(err, signal.aborted);
    }
  }
}

function classifySesError(err: unknown, aborted: boolean): Error {
  if (err instanceof TerminalToolError || err instanceof TransientToolError || err instanceof UncertainToolError) return err;
  const e = err as { name?: string; code?: string; $fault?: string; message?: string };
  if (aborted) return new UncertainToolError(DownstreamErrorCode.TIMEOUT, `${SES} did not answer in time`);
  if (e.name && SES_TRANSIENT.has(e.name)) return new TransientToolError(DownstreamErrorCode.UNAVAILABLE, `${SES} throttled the send`, 1000);
  if (e.code && NOT_SENT.has(e.code)) return new TransientToolError(DownstreamErrorCode.UNAVAILABLE, `${SES} could not be reached`, 1000);
  if (e.$fault === 'client') return new TerminalToolError('EMAIL_REJECTED', `${SES} refused the email (${e.name ?? 'error'})`);
  return new UncertainToolError(DownstreamErrorCode.ERROR, `${SES} failed (${e.name ?? 'error'}); the outcome is unknown`);
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
