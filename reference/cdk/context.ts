import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Node } from 'constructs';
import type { ApprovalPageSettings } from 'idempotent-mcp/cdk';
import type { IdempotentMcpStackProps } from './idempotent-mcp-stack';

/**
 * The context keys `cdk deploy -c key=value` (or cdk.json) understands. Values from the command line are strings,
 * so every key is parsed here, once, into the stack's typed props.
 */
export const ContextKey = {
  stackName: 'stackName',
  authIssuer: 'authIssuer',
  authAudience: 'authAudience',
  authAudienceNotRequiredReason: 'authAudienceNotRequiredReason',
  authRequiredScopes: 'authRequiredScopes',
  confirmationOptOut: 'confirmationOptOut',
  confirmationFormFallback: 'confirmationFormFallback',
  authJwksUrl: 'authJwksUrl',
  authTenantClaim: 'authTenantClaim',
  cognitoDomainPrefix: 'cognitoDomainPrefix',
  allowedOrigins: 'allowedOrigins',
  publicBaseUrl: 'publicBaseUrl',
  approvalPage: 'approvalPage',
  approvalClientId: 'approvalClientId',
  approvalAuthorizeUrl: 'approvalAuthorizeUrl',
  approvalTokenUrl: 'approvalTokenUrl',
  approvalScopes: 'approvalScopes',
  approvalTenantClaim: 'approvalTenantClaim',
  approvalLinkTtlSeconds: 'approvalLinkTtlSeconds',
  paymentsUrl: 'paymentsUrl',
  ticketsUrl: 'ticketsUrl',
  mailboxUrl: 'mailboxUrl',
  emailMode: 'emailMode',
  emailFrom: 'emailFrom',
  downstreamTimeoutMs: 'downstreamTimeoutMs',
  reconcileMaxAttempts: 'reconcileMaxAttempts',
  sandbox: 'sandbox',
  customerManagedKey: 'customerManagedKey',
  tableRemovalPolicy: 'tableRemovalPolicy',
  logLevel: 'logLevel',
  logRetentionDays: 'logRetentionDays',
  alarmEmail: 'alarmEmail',
  alarmTopicArn: 'alarmTopicArn',
  dashboard: 'dashboard',
  nag: 'nag',
} as const;

export interface AppSettings {
  stackName: string;
  props: IdempotentMcpStackProps;
  /** Run the cdk-nag packs on synth. Default true. */
  nag: boolean;
}

/** A context value the app cannot use: one line, naming the key, that `cdk synth` prints instead of a stack trace. */
export class ContextError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContextError';
  }
}

type Get = (key: string) => unknown;

const bad = (key: string, expected: string, value: unknown) =>
  new ContextError(`context "${key}" must be ${expected} (got "${String(value).slice(0, 80)}")`);

function text(get: Get, key: string): string | undefined {
  const value = get(key);
  if (value === undefined || value === null) return undefined;
  const s = String(value).trim();
  return s === '' ? undefined : s;
}

/** Text that must match `pattern`, described as `expected` in the error. */
function matching(get: Get, key: string, pattern: RegExp, expected: string): string | undefined {
  const s = text(get, key);
  if (s !== undefined && !pattern.test(s)) throw bad(key, expected, s);
  return s;
}

function flag(get: Get, key: string, fallback: boolean): boolean {
  const value = get(key);
  if (value === undefined || value === null || value === '') return fallback;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw bad(key, 'true or false', value);
}

/** A flag left unset when absent (its default is the construct's). */
function optionalFlag(get: Get, key: string): boolean | undefined {
  const value = get(key);
  return value === undefined || value === null || value === '' ? undefined : flag(get, key, false);
}

function integer(get: Get, key: string): number | undefined {
  const s = text(get, key);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isInteger(n) || n <= 0) throw bad(key, 'a positive whole number', s);
  return n;
}

function oneOf<T extends string>(get: Get, key: string, allowed: readonly T[]): T | undefined {
  const s = text(get, key);
  if (s === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(s)) throw bad(key, `one of ${allowed.join(', ')}`, s);
  return s as T;
}

/** A URL with one of `schemes` (e.g. `https:`), parsed as the functions will parse it. */
function url(get: Get, key: string, schemes: readonly string[]): string | undefined {
  const s = text(get, key);
  if (s === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(s);
  } catch {
    throw bad(key, `a URL starting with ${schemes.map((scheme) => `${scheme}//`).join(' or ')}`, s);
  }
  if (!schemes.includes(parsed.protocol) || !parsed.hostname)
    throw bad(key, `a URL starting with ${schemes.map((scheme) => `${scheme}//`).join(' or ')}`, s);
  return s;
}

function list(get: Get, key: string, item?: { pattern: RegExp; expected: string }): string[] | undefined {
  const items = text(get, key)
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const wrong = item && items?.find((s) => !item.pattern.test(s));
  if (wrong !== undefined) throw bad(key, `a comma-separated list of ${item!.expected}`, wrong);
  return items;
}

/** IdempotentMcpEndpoint's bound on `approvalPage.linkLifetime` (a day). */
const LINK_LIFETIME_MAX_SECONDS = 86_400;
const HTTP = ['https:', 'http:'] as const;
const HTTPS = ['https:'] as const;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** An MCP tool name (the toolkit's tools are named so; a list of other names would match none). */
const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const ORIGIN = /^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?\/?$/;
const SCOPES = /^[\x21\x23-\x5b\x5d-\x7e]+( +[\x21\x23-\x5b\x5d-\x7e]+)*$/;

/**
 * The approval page's settings. With the stack's own pool the stack makes the page's client; with an external issuer
 * the page is served once the team names its issuer's client for people (all three of id and endpoints).
 */
function approvalPageFrom(get: Get, externalIssuer: boolean): ApprovalPageSettings {
  const K = ContextKey;
  const clientId = matching(get, K.approvalClientId, /^[\x21-\x7e]+$/, 'an OAuth client id (printable, no spaces)');
  const authorizeUrl = url(get, K.approvalAuthorizeUrl, HTTPS);
  const tokenUrl = url(get, K.approvalTokenUrl, HTTPS);
  const scopes = matching(get, K.approvalScopes, SCOPES, 'space-separated OAuth scopes')?.split(' ').filter(Boolean);
  const tenantClaim = matching(get, K.approvalTenantClaim, /^\S+$/, 'a claim name without spaces');
  const given = [clientId, authorizeUrl, tokenUrl].filter((value) => value !== undefined).length;
  const named = [K.approvalClientId, K.approvalAuthorizeUrl, K.approvalTokenUrl, K.approvalScopes, K.approvalTenantClaim].find(
    (key) => text(get, key) !== undefined,
  );
  if (named !== undefined && !externalIssuer)
    throw new ContextError(
      `context "${named}" needs "authIssuer": with the stack's own Cognito pool the stack creates the approval page's client itself`,
    );
  if (given > 0 && given < 3)
    throw new ContextError(
      `context "${K.approvalClientId}", "${K.approvalAuthorizeUrl}" and "${K.approvalTokenUrl}" go together: set all three, or none`,
    );
  if (given === 0 && (scopes || tenantClaim))
    throw new ContextError(
      `context "${scopes ? K.approvalScopes : K.approvalTenantClaim}" needs "${K.approvalClientId}", "${K.approvalAuthorizeUrl}" and "${K.approvalTokenUrl}"`,
    );
  const enabled = optionalFlag(get, K.approvalPage);
  if (enabled === true && externalIssuer && given === 0)
    throw new ContextError(
      `context "${K.approvalPage}" with "authIssuer" needs "${K.approvalClientId}", "${K.approvalAuthorizeUrl}" and "${K.approvalTokenUrl}" (your issuer's client for the page)`,
    );
  const ttl = integer(get, K.approvalLinkTtlSeconds);
  // The construct refuses a link lifetime over a day too (approvalPage.linkLifetime); refused here first, the
  // sentence names the context key the person typed.
  if (ttl !== undefined && ttl > LINK_LIFETIME_MAX_SECONDS)
    throw bad(K.approvalLinkTtlSeconds, `a whole number of seconds from 1 to ${LINK_LIFETIME_MAX_SECONDS} (a day)`, ttl);
  return {
    enabled,
    signIn: given === 3 ? { clientId: clientId!, authorizeUrl: authorizeUrl!, tokenUrl: tokenUrl!, scopes, tenantClaim } : undefined,
    linkLifetime: ttl === undefined ? undefined : Duration.seconds(ttl),
  };
}

/** The known key closest to a misspelled one (fewest one-letter edits). */
function closestContextKey(key: string): string {
  const edits = (a: string, b: string): number => {
    let row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row = next;
    }
    return row[b.length]!;
  };
  return Object.values(ContextKey).reduce((best, known) => (edits(key, known) < edits(key, best) ? known : best));
}

/**
 * This app's keys are plain camelCase words; CDK's own (`@aws-cdk/...` feature flags, `aws:cdk:...`, cached
 * look-ups such as `availability-zones:...`, `cli-telemetry`) never are, so they are left to CDK.
 */
const APP_KEY_SHAPE = /^[a-z][A-Za-z0-9]*$/;
const REMOVED_KEYS = new Set(['urlAuthType']);

function refuseUnknownKeys(keys: Iterable<string>): void {
  const known = new Set<string>(Object.values(ContextKey));
  for (const key of keys) {
    if (!APP_KEY_SHAPE.test(key) || known.has(key) || REMOVED_KEYS.has(key)) continue;
    throw new ContextError(
      `context "${key}" is not a setting of this app; did you mean "${closestContextKey(key)}"? (every key: docs/configuration.md)`,
    );
  }
}

/**
 * Reads the app's settings from CDK context (an App's `node`), or from a plain record in tests. Every value is
 * checked, and a key this app does not know is refused with the closest one it does: a misspelled `-c sandBox=true`
 * would otherwise be ignored in silence. Failures are `ContextError`s, one line naming the key.
 */
export function settingsFromContext(source: Pick<Node, 'tryGetContext' | 'getAllContext'> | Record<string, unknown>): AppSettings {
  const isNode = typeof (source as Node).tryGetContext === 'function';
  const get: Get = isNode ? (key) => (source as Node).tryGetContext(key) : (key) => (source as Record<string, unknown>)[key];
  refuseUnknownKeys(Object.keys(isNode ? (source as Node).getAllContext() : source));
  const K = ContextKey;
  const issuer = url(get, K.authIssuer, HTTPS);
  const retentionDays = integer(get, K.logRetentionDays);
  if (retentionDays !== undefined && !Object.values(logs.RetentionDays).includes(retentionDays as logs.RetentionDays)) {
    throw bad(K.logRetentionDays, 'a CloudWatch retention in days (1, 3, 5, 7, 14, 30, 60, 90, ...)', retentionDays);
  }
  if (get('urlAuthType') !== undefined && text(get, 'urlAuthType') !== 'NONE') {
    // Removed: SigV4 needs the Authorization header that carries the MCP client's bearer token.
    throw new ContextError(
      'context "urlAuthType" is no longer supported: MCP clients send bearer tokens, so the Function URL is always NONE',
    );
  }
  const removal = oneOf(get, K.tableRemovalPolicy, ['retain', 'destroy'] as const);
  const props: IdempotentMcpStackProps = {
    auth: issuer
      ? {
          external: {
            issuer,
            audience: text(get, K.authAudience),
            audienceNotRequiredReason: text(get, K.authAudienceNotRequiredReason),
            requiredScopes: matching(get, K.authRequiredScopes, SCOPES, 'space-separated OAuth scopes')?.split(' ').filter(Boolean),
            jwksUrl: url(get, K.authJwksUrl, HTTPS),
            tenantClaim: matching(get, K.authTenantClaim, /^\S+$/, 'a claim name without spaces'),
          },
        }
      : {
          cognitoDomainPrefix: matching(
            get,
            K.cognitoDomainPrefix,
            /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/,
            'lowercase letters, digits and hyphens (a Cognito domain prefix)',
          ),
        },
    downstreams: {
      paymentsUrl: url(get, K.paymentsUrl, HTTP),
      ticketsUrl: url(get, K.ticketsUrl, HTTP),
      mailboxUrl: url(get, K.mailboxUrl, HTTP),
      emailMode: oneOf(get, K.emailMode, ['ses', 'sandbox'] as const),
      emailFrom: matching(get, K.emailFrom, EMAIL, 'an email address'),
      timeoutMs: integer(get, K.downstreamTimeoutMs),
    },
    sandbox: flag(get, K.sandbox, false),
    allowedOrigins: list(get, K.allowedOrigins, { pattern: ORIGIN, expected: 'origins such as https://app.example.com' }),
    confirmationOptOut: list(get, K.confirmationOptOut, { pattern: TOOL_NAME_PATTERN, expected: 'tool names' }),
    confirmationFormFallback: list(get, K.confirmationFormFallback, { pattern: TOOL_NAME_PATTERN, expected: 'tool names' }),
    publicBaseUrl: url(get, K.publicBaseUrl, HTTPS),
    approvalPage: approvalPageFrom(get, issuer !== undefined),
    customerManagedKey: flag(get, K.customerManagedKey, false),
    tableRemovalPolicy: removal === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    powertools: { logLevel: oneOf(get, K.logLevel, ['DEBUG', 'INFO', 'WARN', 'ERROR'] as const) },
    logRetention: retentionDays as logs.RetentionDays | undefined,
    alarmEmail: matching(get, K.alarmEmail, EMAIL, 'an email address'),
    alarmTopicArn: matching(get, K.alarmTopicArn, /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/, 'an SNS topic ARN'),
    dashboard: flag(get, K.dashboard, true),
    reconcileMaxAttempts: integer(get, K.reconcileMaxAttempts),
  };
  const stackName = matching(get, K.stackName, /^[A-Za-z][A-Za-z0-9-]{0,127}$/, 'a CloudFormation stack name (letters, digits, hyphens)');
  return { stackName: stackName ?? 'IdempotentMcp', props, nag: flag(get, K.nag, true) };
}
