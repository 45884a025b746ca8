import { OutboxDefaults, receivesWithinBudget } from './core/outbox-budget';
import { DEFAULT_APPROVAL_TTL_SECONDS, MAX_APPROVAL_TTL_SECONDS } from './confirmation/core/approval';
import { DEFAULT_DOWNSTREAM_TIMEOUT_MS } from './core/in-flight';
import {
  commaList,
  ConfigError,
  type Env,
  environmentFor,
  httpUrl,
  oneOf,
  originList,
  positiveInt,
  read,
  required,
  scopeList,
  type SettingsOf,
  text,
} from './env-var';

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

/**
 * The outbox queue, its deliveries and the reconciler. An unset queue keeps events pending, it does not fail the start.
 */
export interface SideEffectsConfig {
  /** Local SQS-compatible server (fauxqs); unset on AWS. */
  sqsEndpoint?: string;
  /** The outbox queue the relay sends to and the consumer reads. */
  outboxQueueUrl?: string;
  /**
   * False on an endpoint deployed without an outbox (no deliveries: OUTBOX=off): a tool that queues an effect is
   * refused instead of committing an event nobody delivers. Default true.
   */
  outboxEnabled?: boolean;
  /** Bound of every downstream call a delivery or a reconcile check makes, under the engine's own deadline. */
  downstreamTimeoutMs: number;
  /**
   * The reconciler's period, and the first wait before a downstream that did not answer is asked again. Deployed,
   * the EventBridge schedule's (one minute by default); unset, a local process polls every 5 s.
   */
  reconcileIntervalMs: number;
  /** Checks of an unreachable downstream before the record is parked as NEEDS_REVIEW for a person. */
  reconcileMaxAttempts: number;
  /** Where the consumer puts a message whose delivery budget is spent (the queue's redrive target). */
  outboxDeadLetterQueueUrl?: string;
  /** How long the consumer retries a delivery the downstream refuses for now, from the event's commit. */
  outboxDeliveryBudgetMs: number;
  /** The outbox queue's redrive count: a backstop that must outlast the delivery budget (receivesWithinBudget). */
  outboxMaxReceiveCount: number;
}

/**
 * The MCP function's settings, read once per container from its environment (`loadConfig`).
 */
export interface AppConfig {
  tableName: string;
  /**
   * Whose records these are on a shared table (`DynamoDbIdempotencyStore`'s `keyPrefix`): the endpoint's records, memos and
   * attention partitions carry it, and its reconciler settles only them. Unset: none (an endpoint's default). A
   * gateway's default is its upstream's (docs/gateway.md, "Sharing a table").
   */
  tableKeyPrefix?: string;
  /** DynamoDB Local (or another emulator); unset on AWS. */
  dynamodbEndpoint?: string;
  auth: AuthConfig;
  /** HMAC key of server-minted operation ids (at least 32 characters), or where to read it. */
  operationIdSecret: SecretSource;
  /** Browser origins allowed to call the endpoint besides localhost (DNS-rebinding protection). */
  allowedOrigins: string[];
  /** Base URL for the protected-resource metadata; derived from the request when unset. */
  publicBaseUrl?: string;
  /**
   * Tools with `confirmation: 'approval'` or `'required'` that every 2025-era client may call without the server
   * asking anyone (for clients whose host asks the person itself): such a call runs on the agent's word. Default none.
   */
  confirmationOptOut: string[];
  /**
   * Tools with `confirmation: 'approval'` that a 2026-07-28 client without URL elicitation may confirm in a form
   * instead (the client's word, not a signed-in person's: allow it only where that is acceptable). Default none.
   */
  confirmationFormFallback: string[];
  approvals: ApprovalPageConfig;
  sideEffects: SideEffectsConfig;
}

/**
 * The approval page (`/approvals/<id>`): how long a link lives, and how the person signs in.
 */
export interface ApprovalPageConfig {
  /** How long an approval link can be decided. */
  ttlSeconds: number;
  /**
   * Where the page is served, when not on the endpoint's own host (deployed: the stack's HTTP API for the page): the
   * links point there and the sign-in returns there. Unset: `publicBaseUrl`, else the request's own host.
   */
  baseUrl?: string;
  /**
   * The page's own OAuth client (authorization code with PKCE, public: no secret); its ID tokens carry the client id
   * as audience, which no agent's token does. Locally the dev issuer's sign-in page (relative URLs, on this server).
   * Undefined: no page, and `confirmation: 'approval'` tools are refused with CONFIRMATION_UNAVAILABLE.
   */
  signIn?: {
    clientId: string;
    authorizeUrl: string;
    tokenUrl: string;
    scopes: string[];
    /** The claim of a person's ID token holding their tenant; unset: the bearer tokens' (`auth.tenantClaim`). */
    tenantClaim?: string;
    /**
     * Send the approval's tenant as the OIDC `login_hint`: the local sign-in asks for a tenant and shows it. Off for
     * a real issuer, whose login hint is a person's name.
     */
    tenantHint?: boolean;
  };
}

const DEV_APPROVAL_CLIENT_ID = 'approval-page';
/**
 * Where the local server mounts the dev issuer's sign-in (`createDevSignIn`, lambdas/http/dev-sign-in.ts).
 *
 */
export const DEV_SIGN_IN_MOUNT = '/dev-issuer';
/** The dev issuer's endpoints, on the local server itself. */
const DEV_SIGN_IN_PATHS = { authorize: `${DEV_SIGN_IN_MOUNT}/authorize`, token: `${DEV_SIGN_IN_MOUNT}/token` } as const;

/** Shorter keys make operation ids guessable by brute force. */
export const MIN_SECRET_LENGTH = 32;

/**
 * Where the operation-id HMAC key comes from: its value (local runs, tests), or, deployed, the ARN of a Secrets
 * Manager secret the function reads with the AWS SDK on first use.
 */
export type SecretSource =
  | { value: string }
  | {
      secretArn: string;
      /** A Secrets Manager stand-in (SECRETS_MANAGER_ENDPOINT); unset on AWS. */
      endpoint?: string;
    };

export const DEV_ISSUER = 'urn:idempotent-mcp:dev-issuer';
const DEFAULT_AUDIENCE = 'idempotent-mcp';
export const DEFAULT_TENANT_CLAIM = 'tenant';
const DEFAULT_DEV_AUTH_DIR = '.local/auth';
/** The scope the local issuer's tokens carry and the local endpoint requires, shaped like the Cognito stack's. */
export const DEFAULT_DEV_SCOPE = 'idempotent-mcp/tools';
/**
 * The reconciler's period where it stands on a schedule: deployed, its EventBridge rule's rate (`IdempotentMcpEndpoint`'s
 * `reconcilePeriod`, which the constructs also write as RECONCILE_INTERVAL_MS); in a server of your own, `startReconciler`'s
 * timer. A minute: EventBridge's shortest rate.
 */
export const DEFAULT_RECONCILE_PERIOD_MS = 60_000;
/**
 * RECONCILE_INTERVAL_MS when it is unset, which happens only in a local process (`npm start`, the gateway command):
 * a poll short enough that a developer sees an UNKNOWN settle in seconds. Deployed, the constructs always set the
 * variable to the schedule's period (`DEFAULT_RECONCILE_PERIOD_MS`), so this default is never the deployed one.
 */
const LOCAL_RECONCILE_POLL_MS = 5000;
export const DEFAULT_RECONCILE_MAX_ATTEMPTS = 8;
/** Enough receives for the default delivery budget: SQS never dead-letters a message the budget still allows. */
const DEFAULT_OUTBOX_MAX_RECEIVE_COUNT = receivesWithinBudget(OutboxDefaults.deliveryBudgetSeconds * 1000);

/**
 * Every environment variable the functions read, declared once.
 *
 * @public
 */
export const EnvVars = {
  tableName: text('TABLE_NAME'),
  /** Whose records these are on a shared table; letters, digits and `_ . : -`. */
  tableKeyPrefix: text('TABLE_KEY_PREFIX'),
  /** DynamoDB Local (or another emulator); unset on AWS. */
  dynamodbEndpoint: text('DYNAMODB_ENDPOINT'),
  authMode: oneOf('AUTH_MODE', ['oidc', 'dev'] as const, 'oidc'),
  authIssuer: text('AUTH_ISSUER'),
  authAudience: text('AUTH_AUDIENCE'),
  authJwksUrl: text('AUTH_JWKS_URL'),
  authTenantClaim: text('AUTH_TENANT_CLAIM', DEFAULT_TENANT_CLAIM),
  /** Scopes every token must carry. Default: the dev scope locally, none with an external issuer. */
  authRequiredScopes: scopeList('AUTH_REQUIRED_SCOPES'),
  devAuthDir: text('DEV_AUTH_DIR', DEFAULT_DEV_AUTH_DIR),
  operationIdSecret: text('OPERATION_ID_SECRET'),
  operationIdSecretArn: text('OPERATION_ID_SECRET_ARN'),
  /** A Secrets Manager stand-in, for tests of the deployed path; unset on AWS. */
  secretsManagerEndpoint: httpUrl('SECRETS_MANAGER_ENDPOINT'),
  allowedOrigins: originList('ALLOWED_ORIGINS'),
  /** Tools whose confirmation 2025-era clients do on their side (the endpoint's `confirmationOptOut`). */
  confirmationOptOut: commaList('CONFIRMATION_OPT_OUT_TOOLS'),
  /** Tools with confirmation 'approval' that clients without URL elicitation may confirm in a form instead. */
  confirmationFormFallback: commaList('CONFIRMATION_FORM_FALLBACK_TOOLS'),
  /** The approval page's OAuth client id (with an external issuer or Cognito; locally the dev issuer's). */
  approvalClientId: text('APPROVAL_CLIENT_ID'),
  /** The issuer's authorization endpoint (Cognito managed login: https://<domain>/oauth2/authorize). */
  approvalAuthorizeUrl: httpUrl('APPROVAL_AUTHORIZE_URL'),
  /** The issuer's token endpoint (Cognito: https://<domain>/oauth2/token). */
  approvalTokenUrl: httpUrl('APPROVAL_TOKEN_URL'),
  /** Scopes the page asks for at sign-in (default openid). */
  approvalScopes: scopeList('APPROVAL_SCOPES'),
  /** The claim of a person's ID token that holds their tenant (the stack's pool: custom:tenant); default AUTH_TENANT_CLAIM. */
  approvalTenantClaim: text('APPROVAL_TENANT_CLAIM'),
  /** Where the approval page is served when not on the endpoint's host (the stack's HTTP API); default PUBLIC_BASE_URL. */
  approvalBaseUrl: httpUrl('APPROVAL_BASE_URL'),
  approvalTtlSeconds: positiveInt('APPROVAL_TTL_SECONDS', DEFAULT_APPROVAL_TTL_SECONDS, MAX_APPROVAL_TTL_SECONDS),
  publicBaseUrl: httpUrl('PUBLIC_BASE_URL'),
  sqsEndpoint: httpUrl('SQS_ENDPOINT'),
  outboxQueueUrl: httpUrl('OUTBOX_QUEUE_URL'),
  /** `off` on an endpoint without an outbox (no deliveries): queueing an effect is refused. */
  outbox: oneOf('OUTBOX', ['on', 'off'] as const, 'on'),
  downstreamTimeoutMs: positiveInt('DOWNSTREAM_TIMEOUT_MS', DEFAULT_DOWNSTREAM_TIMEOUT_MS, 60_000),
  reconcileIntervalMs: positiveInt('RECONCILE_INTERVAL_MS', LOCAL_RECONCILE_POLL_MS, 3_600_000),
  /** Checks of an unreachable downstream before a record is parked as NEEDS_REVIEW for a person. */
  reconcileMaxAttempts: positiveInt('RECONCILE_MAX_ATTEMPTS', DEFAULT_RECONCILE_MAX_ATTEMPTS, 100),
  outboxDeadLetterQueueUrl: httpUrl('OUTBOX_DEAD_LETTER_QUEUE_URL'),
  outboxDeliveryBudgetSeconds: positiveInt(
    'OUTBOX_DELIVERY_BUDGET_SECONDS',
    OutboxDefaults.deliveryBudgetSeconds,
    OutboxDefaults.maxDeliveryBudgetSeconds,
  ),
  outboxMaxReceiveCount: positiveInt('OUTBOX_MAX_RECEIVE_COUNT', DEFAULT_OUTBOX_MAX_RECEIVE_COUNT, 1000),
  /** Powertools reads these itself; the constructs set them and lambdas/observability reads the defaults here. */
  powertoolsServiceName: text('POWERTOOLS_SERVICE_NAME', 'idempotent-mcp'),
  powertoolsMetricsNamespace: text('POWERTOOLS_METRICS_NAMESPACE', 'IdempotentMcp'),
  powertoolsLogLevel: oneOf('POWERTOOLS_LOG_LEVEL', ['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT'] as const, 'INFO'),
} as const;

/** Settings by declared name; what a construct puts into a function's environment. */
export type EnvSettings = SettingsOf<typeof EnvVars>;

/**
 * A function's environment from typed settings, by `EnvVars`' names (`{ tableName: 'orders' }` gives
 * `{ TABLE_NAME: 'orders' }`; unset ones are left out): the one way the constructs write the toolkit's variables.
 *
 * @public
 */
export const environmentOf = (
  settings: {
    [K in keyof typeof EnvVars]?: NonNullable<ReturnType<(typeof EnvVars)[K]['parse']>>;
  },
): Record<string, string> => environmentFor(EnvVars, settings);

/**
 * The auth settings alone: `npm run token` signs with the same dev issuer the server trusts.
 */
export function loadAuthConfig(env: Env): AuthConfig {
  const mode = read(env, EnvVars.authMode);
  const tenantClaim = read(env, EnvVars.authTenantClaim);
  if (mode === 'dev') {
    // A dev issuer signs tokens with a key on local disk: a deployed function must never trust it.
    if (env.AWS_LAMBDA_FUNCTION_NAME) throw new ConfigError('AUTH_MODE=dev is for local use only, not on Lambda');
    return {
      mode,
      devAuthDir: read(env, EnvVars.devAuthDir),
      issuer: read(env, EnvVars.authIssuer) ?? DEV_ISSUER,
      audience: read(env, EnvVars.authAudience) ?? DEFAULT_AUDIENCE,
      tenantClaim,
      requiredScopes: read(env, EnvVars.authRequiredScopes) ?? [DEFAULT_DEV_SCOPE],
    };
  }
  const jwksUrl = required(env, EnvVars.authJwksUrl);
  if (!/^https?:\/\//.test(jwksUrl)) throw new ConfigError('AUTH_JWKS_URL must be an http(s) URL');
  return {
    mode,
    issuer: required(env, EnvVars.authIssuer),
    audience: read(env, EnvVars.authAudience),
    jwksUrl,
    tenantClaim,
    requiredScopes: read(env, EnvVars.authRequiredScopes) ?? [],
  };
}

function loadSideEffects(env: Env): SideEffectsConfig {
  return {
    sqsEndpoint: read(env, EnvVars.sqsEndpoint),
    outboxQueueUrl: read(env, EnvVars.outboxQueueUrl),
    outboxEnabled: read(env, EnvVars.outbox) === 'on',
    downstreamTimeoutMs: read(env, EnvVars.downstreamTimeoutMs),
    reconcileIntervalMs: read(env, EnvVars.reconcileIntervalMs),
    reconcileMaxAttempts: read(env, EnvVars.reconcileMaxAttempts),
    outboxDeadLetterQueueUrl: read(env, EnvVars.outboxDeadLetterQueueUrl),
    outboxDeliveryBudgetMs: read(env, EnvVars.outboxDeliveryBudgetSeconds) * 1000,
    outboxMaxReceiveCount: read(env, EnvVars.outboxMaxReceiveCount),
  };
}

/**
 * Local runs and tests set the key itself (OPERATION_ID_SECRET). Deployed, only the ARN of the secret is in the
 * environment (OPERATION_ID_SECRET_ARN), so the value never shows in the template, the console or
 * `GetFunctionConfiguration`; it is read on first use with the SDK's Secrets Manager client.
 */
function loadSecretSource(env: Env): SecretSource {
  const value = read(env, EnvVars.operationIdSecret);
  if (value !== undefined) {
    if (value.length < MIN_SECRET_LENGTH) throw new ConfigError(`OPERATION_ID_SECRET must be at least ${MIN_SECRET_LENGTH} characters`);
    return { value };
  }
  const secretArn = read(env, EnvVars.operationIdSecretArn);
  if (secretArn === undefined) throw new ConfigError('OPERATION_ID_SECRET (or, deployed, OPERATION_ID_SECRET_ARN) is required');
  return { secretArn, endpoint: read(env, EnvVars.secretsManagerEndpoint) };
}

/**
 * Reads and checks the configuration once per container; a missing setting fails the cold start, not a request.
 */
export function loadConfig(env: Env = process.env): AppConfig {
  const operationIdSecret = loadSecretSource(env);
  const publicBaseUrl = read(env, EnvVars.publicBaseUrl);
  return {
    ...loadWorkerConfig(env),
    auth: loadAuthConfig(env),
    operationIdSecret,
    allowedOrigins: read(env, EnvVars.allowedOrigins),
    publicBaseUrl,
    confirmationOptOut: read(env, EnvVars.confirmationOptOut),
    confirmationFormFallback: read(env, EnvVars.confirmationFormFallback),
    approvals: loadApprovalPage(env),
  };
}

function loadApprovalPage(env: Env): ApprovalPageConfig {
  const ttlSeconds = read(env, EnvVars.approvalTtlSeconds);
  const baseUrl = read(env, EnvVars.approvalBaseUrl);
  const tenantClaim = read(env, EnvVars.approvalTenantClaim);
  const scopes = read(env, EnvVars.approvalScopes) ?? ['openid'];
  const clientId = read(env, EnvVars.approvalClientId);
  const authorizeUrl = read(env, EnvVars.approvalAuthorizeUrl);
  const tokenUrl = read(env, EnvVars.approvalTokenUrl);
  if (read(env, EnvVars.authMode) === 'dev' && authorizeUrl === undefined && tokenUrl === undefined)
    return {
      ttlSeconds,
      baseUrl,
      signIn: {
        clientId: clientId ?? DEV_APPROVAL_CLIENT_ID,
        authorizeUrl: DEV_SIGN_IN_PATHS.authorize,
        tokenUrl: DEV_SIGN_IN_PATHS.token,
        scopes,
        tenantClaim,
        tenantHint: true,
      },
    };
  const set = [clientId, authorizeUrl, tokenUrl].filter((value) => value !== undefined).length;
  if (set === 0) return { ttlSeconds, baseUrl };
  if (set < 3)
    throw new ConfigError(
      'APPROVAL_CLIENT_ID, APPROVAL_AUTHORIZE_URL and APPROVAL_TOKEN_URL go together: set all three, or none for no approval page',
    );
  return { ttlSeconds, baseUrl, signIn: { clientId: clientId!, authorizeUrl: authorizeUrl!, tokenUrl: tokenUrl!, scopes, tenantClaim } };
}

/**
 * What the background functions (relay, consumer, reconciler) read: the table, the queue and the downstream
 * settings. They serve no MCP request, so they need neither the issuer nor the operation-id secret.
 */
export type WorkerConfig = Pick<AppConfig, 'tableName' | 'tableKeyPrefix' | 'dynamodbEndpoint' | 'sideEffects'>;

/** Whether `value` may be a TABLE_KEY_PREFIX: letters, digits and _ . : - (never '#', the keys' separator). */
export const isTableKeyPrefix = (value: string): boolean => /^[A-Za-z0-9_.:-]+$/.test(value);

export function loadWorkerConfig(env: Env = process.env): WorkerConfig {
  const tableName = required(env, EnvVars.tableName);
  const tableKeyPrefix = read(env, EnvVars.tableKeyPrefix) || undefined;
  if (tableKeyPrefix !== undefined && !isTableKeyPrefix(tableKeyPrefix))
    throw new ConfigError(
      `${EnvVars.tableKeyPrefix.name} may contain only letters, digits and _ . : - (got ${tableKeyPrefix.slice(0, 80)})`,
    );
  return {
    tableName,
    ...(tableKeyPrefix !== undefined ? { tableKeyPrefix } : {}),
    dynamodbEndpoint: read(env, EnvVars.dynamodbEndpoint),
    sideEffects: loadSideEffects(env),
  };
}
