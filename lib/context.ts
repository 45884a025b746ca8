import { RemovalPolicy } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Node } from 'constructs';
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
  authJwksUrl: 'authJwksUrl',
  authTenantClaim: 'authTenantClaim',
  cognitoDomainPrefix: 'cognitoDomainPrefix',
  allowedOrigins: 'allowedOrigins',
  publicBaseUrl: 'publicBaseUrl',
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

type Get = (key: string) => unknown;

function text(get: Get, key: string): string | undefined {
  const value = get(key);
  if (value === undefined || value === null) return undefined;
  const s = String(value).trim();
  return s === '' ? undefined : s;
}

function flag(get: Get, key: string, fallback: boolean): boolean {
  const value = get(key);
  if (value === undefined || value === null || value === '') return fallback;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new Error(`context "${key}" must be true or false (got "${String(value)}")`);
}

function integer(get: Get, key: string): number | undefined {
  const s = text(get, key);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`context "${key}" must be a positive integer (got "${s}")`);
  return n;
}

function oneOf<T extends string>(get: Get, key: string, allowed: readonly T[]): T | undefined {
  const s = text(get, key);
  if (s === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(s)) throw new Error(`context "${key}" must be one of ${allowed.join(', ')} (got "${s}")`);
  return s as T;
}

const list = (get: Get, key: string) =>
  text(get, key)
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** Reads the app's settings from CDK context (`node.tryGetContext`), or from any key lookup in tests. */
export function settingsFromContext(node: Pick<Node, 'tryGetContext'> | Get): AppSettings {
  const get: Get = typeof node === 'function' ? node : (key) => node.tryGetContext(key);
  const K = ContextKey;
  const issuer = text(get, K.authIssuer);
  const retentionDays = integer(get, K.logRetentionDays);
  if (retentionDays !== undefined && !Object.values(logs.RetentionDays).includes(retentionDays as logs.RetentionDays)) {
    throw new Error(`context "${K.logRetentionDays}" must be a CloudWatch retention (1, 3, 5, 7, 14, 30, 60, 90, ...)`);
  }
  if (get('urlAuthType') !== undefined && text(get, 'urlAuthType') !== 'NONE') {
    // Removed: SigV4 needs the Authorization header that carries the MCP client's bearer token.
    throw new Error('context "urlAuthType" is no longer supported: MCP clients send bearer tokens, so the Function URL is always NONE');
  }
  const removal = oneOf(get, K.tableRemovalPolicy, ['retain', 'destroy'] as const);
  const props: IdempotentMcpStackProps = {
    auth: issuer
      ? {
          external: {
            issuer,
            audience: text(get, K.authAudience),
            audienceNotRequiredReason: text(get, K.authAudienceNotRequiredReason),
            requiredScopes: text(get, K.authRequiredScopes)?.split(' ').filter(Boolean),
            jwksUrl: text(get, K.authJwksUrl),
            tenantClaim: text(get, K.authTenantClaim),
          },
        }
      : { cognitoDomainPrefix: text(get, K.cognitoDomainPrefix) },
    downstreams: {
      paymentsUrl: text(get, K.paymentsUrl),
      ticketsUrl: text(get, K.ticketsUrl),
      mailboxUrl: text(get, K.mailboxUrl),
      emailMode: oneOf(get, K.emailMode, ['ses', 'sandbox'] as const),
      emailFrom: text(get, K.emailFrom),
      timeoutMs: integer(get, K.downstreamTimeoutMs),
    },
    sandbox: flag(get, K.sandbox, false),
    allowedOrigins: list(get, K.allowedOrigins),
    confirmationOptOut: list(get, K.confirmationOptOut),
    publicBaseUrl: text(get, K.publicBaseUrl),
    customerManagedKey: flag(get, K.customerManagedKey, false),
    tableRemovalPolicy: removal === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    powertools: { logLevel: oneOf(get, K.logLevel, ['DEBUG', 'INFO', 'WARN', 'ERROR'] as const) },
    logRetention: retentionDays as logs.RetentionDays | undefined,
    alarmEmail: text(get, K.alarmEmail),
    alarmTopicArn: text(get, K.alarmTopicArn),
    dashboard: flag(get, K.dashboard, true),
    reconcileMaxAttempts: integer(get, K.reconcileMaxAttempts),
  };
  return { stackName: text(get, K.stackName) ?? 'IdempotentMcp', props, nag: flag(get, K.nag, true) };
}
