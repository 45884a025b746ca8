import { ConfigError, EnvVars, read, type Env } from 'idempotent-mcp/lambda';
import { environmentFor, httpUrl, oneOf, text, type SettingsOf } from './env-vars';

const DEFAULT_EMAIL_FROM = 'agent@example.com';

/**
 * The reference endpoint's own settings: where its demo tools' downstreams are, and the sandbox. A team's endpoint
 * has none of these; the reference stack sets them through the endpoint's `environment` prop, from this declaration.
 */
export const ReferenceEnvVars = {
  /** Payments provider base URL (dedups on `Idempotency-Key`, answers "what happened to key K"). */
  paymentsUrl: httpUrl('PAYMENTS_URL'),
  /** Ticket system base URL (no idempotency of its own). */
  ticketsUrl: httpUrl('TICKETS_URL'),
  /** Mailbox base URL, used when emailMode is `sandbox`. */
  mailboxUrl: httpUrl('MAILBOX_URL'),
  /** 'ses': SES v2 from `emailFrom`; 'sandbox': the sandbox mailbox at `mailboxUrl`. */
  emailMode: oneOf('EMAIL_MODE', ['ses', 'sandbox'] as const, 'ses'),
  emailFrom: text('EMAIL_FROM', DEFAULT_EMAIL_FROM),
  /** The sandbox downstreams are in use: `npm start` mounts `/sandbox/*` and opens their table. Off unless asked for. */
  sandboxEnabled: {
    name: 'SANDBOX_ENABLED',
    parse: (raw: string | undefined) => raw?.trim() === 'true',
    format: (value: boolean) => String(value),
  },
  /** The sandbox downstreams' ledger and faults (their own table). Default: the service table's name + `-sandbox`. */
  sandboxTableName: text('SANDBOX_TABLE_NAME'),
} as const;

export type ReferenceSettings = SettingsOf<typeof ReferenceEnvVars>;

/** The reference functions' environment from typed settings (unset ones are left out). */
export const referenceEnvironmentOf = (settings: ReferenceSettings): Record<string, string> => environmentFor(ReferenceEnvVars, settings);

export interface ReferenceConfig {
  paymentsUrl?: string;
  ticketsUrl?: string;
  mailboxUrl?: string;
  emailMode: 'ses' | 'sandbox';
  emailFrom: string;
  /** The toolkit's bound of one downstream call, shared by the demo clients. */
  downstreamTimeoutMs: number;
  sandboxEnabled: boolean;
  sandboxTableName: string;
}

/** The downstreams a deployment has configured: a demo tool whose downstream is not is not served (docs/deploy.md). */
export interface ConfiguredDownstreams {
  /** PAYMENTS_URL: request_payment. */
  payments: boolean;
  /** TICKETS_URL: create_ticket. */
  tickets: boolean;
  /** EMAIL_MODE=sandbox with MAILBOX_URL, or SES with EMAIL_FROM set (not its local default): send_email. */
  email: boolean;
}

/** Which downstreams these settings configure, read from the same declarations as everything else. */
export function configuredDownstreams(env: Env = process.env): ConfiguredDownstreams {
  const email =
    read(env, ReferenceEnvVars.emailMode) === 'sandbox'
      ? read(env, ReferenceEnvVars.mailboxUrl) !== undefined
      : // SES sends only from an identity verified in the account: its local default names none.
        (env[ReferenceEnvVars.emailFrom.name]?.trim() ?? '') !== '';
  return {
    payments: read(env, ReferenceEnvVars.paymentsUrl) !== undefined,
    tickets: read(env, ReferenceEnvVars.ticketsUrl) !== undefined,
    email,
  };
}

/** Reads the reference settings once per container; a bad one fails the cold start with its name. */
export function loadReferenceConfig(env: Env = process.env): ReferenceConfig {
  const emailFrom = read(env, ReferenceEnvVars.emailFrom);
  if (!/^[^\s@]+@[^\s@]+$/.test(emailFrom)) throw new ConfigError('EMAIL_FROM must be an email address');
  const tableName = read(env, EnvVars.tableName);
  const sandboxTableName = read(env, ReferenceEnvVars.sandboxTableName) ?? (tableName && `${tableName}-sandbox`);
  if (!sandboxTableName) throw new ConfigError('SANDBOX_TABLE_NAME (or TABLE_NAME) must be set');
  return {
    paymentsUrl: read(env, ReferenceEnvVars.paymentsUrl),
    ticketsUrl: read(env, ReferenceEnvVars.ticketsUrl),
    mailboxUrl: read(env, ReferenceEnvVars.mailboxUrl),
    emailMode: read(env, ReferenceEnvVars.emailMode),
    emailFrom,
    downstreamTimeoutMs: read(env, EnvVars.downstreamTimeoutMs),
    sandboxEnabled: read(env, ReferenceEnvVars.sandboxEnabled),
    sandboxTableName,
  };
}
