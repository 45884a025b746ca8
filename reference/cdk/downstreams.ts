import { referenceEnvironmentOf } from '../config';

/** Where the side-effect tools send their work; the sandbox construct fills these in for a demo. */
export interface DownstreamSettings {
  /** Payments provider base URL (dedups on `Idempotency-Key`, answers "what happened to key K"). */
  paymentsUrl?: string;
  /** Ticket system base URL (no idempotency of its own). */
  ticketsUrl?: string;
  /** Mailbox base URL, used when emailMode is `sandbox`. */
  mailboxUrl?: string;
  /** `ses` sends through Amazon SES from `emailFrom`; `sandbox` posts to the mailbox. Default: `ses` with emailFrom, else unset. */
  emailMode?: 'ses' | 'sandbox';
  /** SES verified sender identity (address or domain address). Required with emailMode `ses`. */
  emailFrom?: string;
  /** Timeout of one downstream call. Default: the functions' own default (the toolkit's DOWNSTREAM_TIMEOUT_MS). */
  timeoutMs?: number;
}

/** A sender address alone means SES. */
export const emailModeOf = (settings: DownstreamSettings) => settings.emailMode ?? (settings.emailFrom ? 'ses' : undefined);

/** The downstream part of a function's environment; unset URLs are left out (the tool then reports it unconfigured). */
export function downstreamEnvironment(settings: DownstreamSettings): Record<string, string> {
  return referenceEnvironmentOf({
    emailMode: emailModeOf(settings),
    paymentsUrl: settings.paymentsUrl || undefined,
    ticketsUrl: settings.ticketsUrl || undefined,
    mailboxUrl: settings.mailboxUrl || undefined,
    emailFrom: settings.emailFrom || undefined,
  });
}

export function validateDownstreams(settings: DownstreamSettings): void {
  if (settings.emailMode === 'ses' && !settings.emailFrom) {
    throw new Error('emailMode "ses" needs emailFrom: an SES verified identity to send from');
  }
  if (settings.emailMode === 'sandbox' && !settings.mailboxUrl) {
    throw new Error('emailMode "sandbox" needs mailboxUrl: the mailbox to post to (the sandbox flag sets both)');
  }
  if (settings.emailMode !== undefined && settings.emailMode !== 'ses' && settings.emailMode !== 'sandbox') {
    throw new Error(`emailMode must be "ses" or "sandbox" (got "${settings.emailMode as string}")`);
  }
}
