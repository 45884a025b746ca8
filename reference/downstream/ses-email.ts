import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2';
import { TerminalToolError, TransientToolError, UncertainToolError } from 'idempotent-mcp/engine';
import type { EmailMessage, EmailSender, EmailSendOptions, SentEmail } from './email';
import { boundedSignal, DownstreamErrorCode } from './http';

/**
 * The SES sender lives apart from ./email so that only code that delivers email (the outbox consumer's deliveries,
 * reference/tools/reference-deliveries.ts) imports the SES client: the MCP function only commits outbox events and
 * its bundle stays without it.
 */

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
    const bounded = boundedSignal(options.signal, this.options.timeoutMs);
    const signal = bounded.signal;
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
    } finally {
      bounded.settled();
    }
  }
}

function classifySesError(err: unknown, aborted: boolean): Error {
  if (err instanceof TerminalToolError || err instanceof TransientToolError || err instanceof UncertainToolError) return err;
  const e = err as { name?: string; code?: string; $fault?: string; message?: string };
  if (aborted) return new UncertainToolError(DownstreamErrorCode.TIMEOUT, `${SES} did not answer in time`);
  if (e.name && SES_TRANSIENT.has(e.name))
    return new TransientToolError(DownstreamErrorCode.UNAVAILABLE, `${SES} throttled the send`, 1000);
  if (e.code && NOT_SENT.has(e.code)) return new TransientToolError(DownstreamErrorCode.UNAVAILABLE, `${SES} could not be reached`, 1000);
  if (e.$fault === 'client') return new TerminalToolError('EMAIL_REJECTED', `${SES} refused the email (${e.name ?? 'error'})`);
  return new UncertainToolError(DownstreamErrorCode.ERROR, `${SES} failed (${e.name ?? 'error'}); the outcome is unknown`);
}
