import { randomBytes } from 'node:crypto';
import { MIN_SECRET_LENGTH, type SecretSource } from './runtime/operation-id-secret';

/**
 * The one place that reads environment variables. Everything else receives an `AppConfig`, so a test or
 * the local stack builds one from a plain record and nothing reads `process.env` behind its back.
 */
export type AuthConfig =
  | {
      /** A local issuer whose key pair lives in `devAuthDir` (`npm start`, tests). Never used on Lambda. */
      mode: 'dev';
      devAuthDir: string;
      issuer: string;
      audience: string;
      tenantClaim: string;
      /** Scopes every token must carry (403 insufficient_scope otherwise). */
      requiredScopes: string[];
    }
  | {
      /** An external OpenID Connect / OAuth issuer (Cognito by default in the CDK stack). */
      mode: 'oidc';
      issuer: string;
      /**
       * Unset: `aud` is not checked. Cognito client-credentials access tokens carry no `aud` (only `client_id` and
       * `scope`); the stack's user pool is its own, so its issuer already pins who the tokens are for.
       */
      audience?: string;
      jwksUrl: string;
      tenantClaim: string;
      /** Scopes every token must carry (403 insufficient_scope otherwise); the stack's tools scope with Cognito. */
      requiredScopes: string[];
    };

/** Downstream systems, the outbox queue and the reconciler. Unset URLs fail the calls that need them, not the start. */
export interface SideEffectsConfig {
  /** Local SQS-compatible server (fauxqs); unset on AWS. */
  sqsEndpoint?: string;
  /** The outbox queue the relay sends to and the consumer reads. */
  outboxQueueUrl?: string;
  /** Base URLs of the payments provider, the ticket system and (EMAIL_MODE=sandbox) the mailbox. */
  paymentsUrl?: string;
  ticketsUrl?: string;
  mailboxUrl?: string;
  /** 'ses': SES v2 from `emailFrom`; 'sandbox': the sandbox mailbox at `mailboxUrl`. */
  emailMode: 'ses' | 'sandbox';
  emailFrom: string;
  /** Bound of every downstream call, under the engine's own deadline. */
  downstreamTimeoutMs: number;
  /** How often the local reconciler runs (deployed: the EventBridge schedule). */
  reconcileIntervalMs: number;
  /** The outbox queue's redrive count: the consumer's last attempt before the dead-letter queue. */
  outboxMaxReceiveCount: number;
  /** The sandbox downstreams' ledger and faults (their own table). */
  sandboxTableName: string;
}

export interface AppConfig {
  tableName: string;
  /** DynamoDB Local (or another emulator); unset on AWS. */
  dynamodbEndpoint?: string;
  auth: AuthConfig;
  /** HMAC key of server-minted operation ids (at least 32 characters), or where to read it. */
  operationIdSecret: SecretSource;
  /** Browser origins allowed to call the endpoint besides localhost (DNS-rebinding protection). */
  allowedOrigins: string[];
  /** The sandbox downstreams are in use: their store is built, and `npm start` mounts `/sandbox/*`. Off unless asked for. */
  sandboxEnabled: boolean;
  /** Base URL for the protected-resource metadata; derived from the request when unset. */
  publicBaseUrl?: string;
  /**
   * Tools with `confirmation: 'required'` that 2025-era clients may call without the server asking the person
   * (CONFIRMATION_OPT_OUT_TOOLS, comma-separated): for clients that confirm on their side. Default none.
   */
  confirmationOptOut: string[];
  sideEffects: SideEffectsConfig;
}

export type Env = Record<string, string | undefined>;

export const DEV_ISSUER = 'urn:idempotent-mcp:dev-issuer';
export const DEFAULT_AUDIENCE = 'idempotent-mcp';
export const DEFAULT_TENANT_CLAIM = 'tenant';
export const DEFAULT_DEV_AUTH_DIR = '.local/auth';
/** The scope the local issuer's tokens carry and the local endpoint requires, shaped like the Cognito stack's. */
export const DEFAULT_DEV_SCOPE = 'idempotent-mcp/tools';
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** AUTH_REQUIRED_SCOPES: space-separated scope tokens (RFC 6749 §3.3); set but blank requires none. */
function scopes(env: Env, name: string, fallback: string[]): string[] {
  const value = env[name];
  if (value === undefined) return fallback;
  const list = value.split(' ').filter(Boolean);
  const bad = list.find((scope) => !SCOPE_TOKEN.test(scope));
  if (bad !== undefined) throw new ConfigError(`${name} must be space-separated scopes without quotes or backslashes (got '${bad.slice(0, 40)}')`);
  return [...new Set(list)];
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function required(env: Env, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new ConfigError(`${name} must be set`);
  return value;
}

function optional(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/** The auth settings alone: `npm run token` signs with the same dev issuer the server trusts. */
export function loadAuthConfig(env: Env): AuthConfig {
  const mode = optional(env, 'AUTH_MODE') ?? 'oidc';
  const tenantClaim = optional(env, 'AUTH_TENANT_CLAIM') ?? DEFAULT_TENANT_CLAIM;
  if (mode === 'dev') {
    // A dev issuer signs tokens with a key on local disk: a deployed function must never trust it.
    if (env.AWS_LAMBDA_FUNCTION_NAME) throw new ConfigError('AUTH_MODE=dev is for local use only, not on Lambda');
    return {
      mode,
      devAuthDir: optional(env, 'DEV_AUTH_DIR') ?? DEFAULT_DEV_AUTH_DIR,
      issuer: optional(env, 'AUTH_ISSUER') ?? DEV_ISSUER,
      audience: optional(env, 'AUTH_AUDIENCE') ?? DEFAULT_AUDIENCE,
      tenantClaim,
      requiredScopes: scopes(env, 'AUTH_REQUIRED_SCOPES', [DEFAULT_DEV_SCOPE]),
    };
  }
  if (mode !== 'oidc') throw new ConfigError(`AUTH_MODE must be 'dev' or 'oidc' (got '${mode}')`);
  const jwksUrl = required(env, 'AUTH_JWKS_URL');
  if (!/^https?:\/\//.test(jwksUrl)) throw new ConfigError('AUTH_JWKS_URL must be an http(s) URL');
  return {
    mode,
    issuer: required(env, 'AUTH_ISSUER'),
    audience: optional(env, 'AUTH_AUDIENCE'),
    jwksUrl,
    tenantClaim,
    requiredScopes: scopes(env, 'AUTH_REQUIRED_SCOPES', []),
  };
}

function commaList(env: Env, name: string): string[] {
  return (optional(env, name) ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

function optionalUrl(env: Env, name: string): string | undefined {
  const value = optional(env, name)?.replace(/\/+$/, '');
  if (value !== undefined && !/^https?:\/\/[^\s]+$/.test(value)) throw new ConfigError(`${name} must be an http(s) URL`);
  return value;
}

function positiveInt(env: Env, name: string, fallback: number, max: number): number {
  const value = optional(env, name);
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0 || n > max) throw new ConfigError(`${name} must be a whole number from 1 to ${max} (got '${value}')`);
  return n;
}

export const DEFAULT_DOWNSTREAM_TIMEOUT_MS = 3000;
export const DEFAULT_RECONCILE_INTERVAL_MS = 5000;
export const DEFAULT_OUTBOX_MAX_RECEIVE_COUNT = 5;

function loadSideEffects(env: Env, tableName: string): SideEffectsConfig {
  const emailMode = optional(env, 'EMAIL_MODE') ?? 'ses';
  if (emailMode !== 'ses' && emailMode !== 'sandbox') throw new ConfigError(`EMAIL_MODE must be 'ses' or 'sandbox' (got '${emailMode}')`);
  const emailFrom = optional(env, 'EMAIL_FROM') ?? 'agent@example.com';
  if (!/^[^\s@]+@[^\s@]+$/.test(emailFrom)) throw new ConfigError('EMAIL_FROM must be an email address');
  return {
    sqsEndpoint: optionalUrl(env, 'SQS_ENDPOINT'),
    outboxQueueUrl: optionalUrl(env, 'OUTBOX_QUEUE_URL'),
    paymentsUrl: optionalUrl(env, 'PAYMENTS_URL'),
    ticketsUrl: optionalUrl(env, 'TICKETS_URL'),
    mailboxUrl: optionalUrl(env, 'MAILBOX_URL'),
    emailMode,
    emailFrom,
    downstreamTimeoutMs: positiveInt(env, 'DOWNSTREAM_TIMEOUT_MS', DEFAULT_DOWNSTREAM_TIMEOUT_MS, 60_000),
    reconcileIntervalMs: positiveInt(env, 'RECONCILE_INTERVAL_MS', DEFAULT_RECONCILE_INTERVAL_MS, 3_600_000),
    outboxMaxReceiveCount: positiveInt(env, 'OUTBOX_MAX_RECEIVE_COUNT', DEFAULT_OUTBOX_MAX_RECEIVE_COUNT, 1000),
    sandboxTableName: optional(env, 'SANDBOX_TABLE_NAME') ?? `${tableName}-sandbox`,
  };
}

/**
 * Local runs and tests set the key itself (OPERATION_ID_SECRET). Deployed, only the ARN of the secret is in the
 * environment (OPERATION_ID_SECRET_ARN), so the value never shows in the template, the console or
 * `GetFunctionConfiguration`; it is read on first use through the Parameters and Secrets extension.
 */
function loadSecretSource(env: Env): SecretSource {
  const value = optional(env, 'OPERATION_ID_SECRET');
  if (value !== undefined) {
    if (value.length < MIN_SECRET_LENGTH) throw new ConfigError(`OPERATION_ID_SECRET must be at least ${MIN_SECRET_LENGTH} characters`);
    return { value };
  }
  const secretArn = optional(env, 'OPERATION_ID_SECRET_ARN');
  if (secretArn === undefined) throw new ConfigError('OPERATION_ID_SECRET (or, deployed, OPERATION_ID_SECRET_ARN) is required');
  const sessionToken = optional(env, 'AWS_SESSION_TOKEN');
  if (sessionToken === undefined) throw new ConfigError('OPERATION_ID_SECRET_ARN is read through the Lambda extension, which needs AWS_SESSION_TOKEN');
  return {
    secretArn,
    extensionPort: positiveInt(env, 'PARAMETERS_SECRETS_EXTENSION_HTTP_PORT', 2773, 65_535),
    sessionToken,
  };
}

/** Reads and checks the configuration once per container; a missing setting fails the cold start, not a request. */
export function loadConfig(env: Env = process.env): AppConfig {
  const operationIdSecret = loadSecretSource(env);
  const publicBaseUrl = optional(env, 'PUBLIC_BASE_URL')?.replace(/\/+$/, '');
  const tableName = required(env, 'TABLE_NAME');
  return {
    tableName,
    dynamodbEndpoint: optional(env, 'DYNAMODB_ENDPOINT'),
    auth: loadAuthConfig(env),
    operationIdSecret,
    allowedOrigins: commaList(env, 'ALLOWED_ORIGINS').map((origin) => origin.replace(/\/+$/, '')),
    sandboxEnabled: optional(env, 'SANDBOX_ENABLED') === 'true',
    publicBaseUrl,
    confirmationOptOut: commaList(env, 'CONFIRMATION_OPT_OUT_TOOLS'),
    sideEffects: loadSideEffects(env, tableName),
  };
}

const WORKERS_VERIFY_NO_TOKENS = 'urn:idempotent-mcp:workers-verify-no-tokens';

/**
 * The background functions (relay, consumer, reconciler) serve no MCP requests: their deployment carries the table,
 * queue and downstream settings, not the issuer or the operation-id secret. What the shared services need of those
 * is filled with values that can never verify anything (an unresolvable JWKS host, a throwaway secret).
 */
export function loadWorkerConfig(env: Env = process.env): AppConfig {
  return loadConfig({
    AUTH_MODE: 'oidc',
    AUTH_ISSUER: WORKERS_VERIFY_NO_TOKENS,
    AUTH_AUDIENCE: WORKERS_VERIFY_NO_TOKENS,
    AUTH_JWKS_URL: 'https://workers-verify-no-tokens.invalid/jwks.json',
    OPERATION_ID_SECRET: randomBytes(32).toString('base64url'),
    ...env,
  });
}

export interface SandboxConfig {
  sandboxTableName: string;
  dynamodbEndpoint?: string;
  /** The callers' downstream timeout: `commit-then-timeout` holds its answer past it. */
  downstreamTimeoutMs: number;
}

/** The deployed sandbox function: its own table only. */
export function loadSandboxConfig(env: Env = process.env): SandboxConfig {
  return {
    sandboxTableName: required(env, 'SANDBOX_TABLE_NAME'),
    dynamodbEndpoint: optional(env, 'DYNAMODB_ENDPOINT'),
    downstreamTimeoutMs: positiveInt(env, 'DOWNSTREAM_TIMEOUT_MS', DEFAULT_DOWNSTREAM_TIMEOUT_MS, 60_000),
  };
}
