import { Duration, Fn, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { MCP_PATH } from '../../lambdas/core/endpoint-paths';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { environmentOf, type EnvSettings } from '../../lambdas/config';
import type { ApprovalSignIn, TokenVerification } from './auth';
import type { IdempotencyTable, TableItemAction } from './idempotency-store';
import { DEFAULT_RECONCILE_PERIOD } from './reconciler';
import { commonFunctionProps, downstreamTimeoutMs, ServiceFunction, type CommonFunctionProps } from './service-function';

/**
 * Props of `McpFunction`: its entry, the table, the auth, the outbox and approval page, and the function's settings.
 */
export interface McpFunctionProps extends CommonFunctionProps {
  /** The handler file to bundle: IdempotentMcpEndpoint generates one around your tools module. */
  readonly entry: string;
  readonly store: IdempotencyTable;
  readonly auth: TokenVerification;
  /**
   * Bound of one downstream call a tool makes (DOWNSTREAM_TIMEOUT_MS).
   * @default 3 seconds (the functions' own default)
   */
  readonly downstreamTimeout?: Duration;
  /**
   * Browser origins allowed to call (DNS-rebinding protection).
   * @default none: only non-browser clients
   */
  readonly allowedOrigins?: string[];
  /**
   * Public base URL when a custom domain fronts the Function URL.
   * @default the request's own host
   */
  readonly publicBaseUrl?: string;
  /**
   * The engine's budget is cut from the remaining time, leaving its completion margin.
   * @default Duration.seconds(29)
   */
  readonly timeout?: Duration;
  /**
   * More CPU for the cold start; billed only while running.
   * @default 1024
   */
  readonly memorySize?: number;
  /**
   * How often the reconciler runs: `unknown` answers suggest retrying after about one period.
   * @default Duration.minutes(1)
   */
  readonly reconcilePeriod?: Duration;
  /**
   * Signing key of operation ids.
   * @default a new generated secret
   */
  readonly operationIdSecret?: secretsmanager.ISecret;
  /**
   * Tools with `confirmation: 'required'` that 2025-era clients may call without the person's confirmation through
   * the server (for clients that confirm on their side).
   * @default none: those clients get CONFIRMATION_UNAVAILABLE
   */
  readonly confirmationOptOut?: string[];
  /**
   * Tools with `confirmation: 'approval'` that a 2026-07-28 client without URL elicitation may confirm in a form.
   * @default none: those clients get the approval link as a tool result (APPROVAL_REQUIRED)
   */
  readonly confirmationFormFallback?: string[];
  /**
   * Whether the endpoint has an outbox (queue, relay, consumer). Without one (OUTBOX=off) a tool that queues an
   * effect answers a clear error instead of committing an event nobody delivers.
   * @default true
   */
  readonly outbox?: boolean;
  /**
   * The approval page this function serves: how people sign in, where the page is when not on the function's own
   * host (`baseUrl`: the stack's HTTP API for the page), how long a link lives.
   * @default none: no page; `confirmation: 'approval'` tools answer CONFIRMATION_UNAVAILABLE
   */
  readonly approvalPage?: { readonly signIn: ApprovalSignIn; readonly baseUrl?: string; readonly linkLifetime?: Duration };
}

function approvalPageSettings(page: McpFunctionProps['approvalPage']): EnvSettings {
  if (!page) return {};
  const { signIn, baseUrl, linkLifetime } = page;
  return {
    approvalClientId: signIn.clientId,
    approvalAuthorizeUrl: signIn.authorizeUrl,
    approvalTokenUrl: signIn.tokenUrl,
    approvalScopes: signIn.scopes?.length ? signIn.scopes : undefined,
    approvalTenantClaim: signIn.tenantClaim || undefined,
    approvalBaseUrl: baseUrl || undefined,
    approvalTtlSeconds: linkLifetime?.toSeconds(),
  };
}

/**
 * What the MCP function may do to the table: claim (Put), read (Get), settle (Update, or a TransactWriteItems made
 * of Put/Update items), release (Delete). TransactWriteItems has no IAM action of its own: each item is authorized as
 * its Put/Update/Delete; no transaction has a ConditionCheck item (the artifact test checks every call). No Query, no Scan.
 */
export const MCP_TABLE_ACTIONS: TableItemAction[] = ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'];

/**
 * The MCP endpoint: stateless streamable HTTP through a Function URL (payload 2.0), buffered JSON answers.
 */
export class McpFunction extends Construct {
  readonly handler: ServiceFunction;
  readonly url: lambda.FunctionUrl;
  readonly operationIdSecret: secretsmanager.ISecret;

  constructor(scope: Construct, id: string, props: McpFunctionProps) {
    super(scope, id);
    this.operationIdSecret =
      props.operationIdSecret ??
      new secretsmanager.Secret(this, 'OperationIdSecret', {
        description: 'HMAC key that makes server-minted operation ids unforgeable',
        generateSecretString: { passwordLength: 64, excludePunctuation: true },
        // Operation ids are short-lived: losing the key only invalidates ids not yet used.
        removalPolicy: RemovalPolicy.DESTROY,
      });

    const environment = {
      ...environmentOf({
        tableName: props.store.tableName,
        authMode: 'oidc',
        authIssuer: props.auth.issuer,
        authJwksUrl: props.auth.jwksUrl,
        authTenantClaim: props.auth.tenantClaim,
        authAudience: props.auth.audience || undefined,
        authRequiredScopes: props.auth.requiredScopes,
        // The ARN, not the value, so the key never sits in the template, the console or `GetFunctionConfiguration`.
        // The first call that needs it reads it with the SDK's Secrets Manager client (GetSecretValue, granted below).
        operationIdSecretArn: this.operationIdSecret.secretArn,
        allowedOrigins: props.allowedOrigins ?? [],
        reconcileIntervalMs: (props.reconcilePeriod ?? DEFAULT_RECONCILE_PERIOD).toMilliseconds(),
        publicBaseUrl: props.publicBaseUrl || undefined,
        confirmationOptOut: props.confirmationOptOut?.length ? props.confirmationOptOut : undefined,
        confirmationFormFallback: props.confirmationFormFallback?.length ? props.confirmationFormFallback : undefined,
        downstreamTimeoutMs: downstreamTimeoutMs(props.downstreamTimeout),
        outbox: props.outbox === false ? 'off' : undefined,
        ...approvalPageSettings(props.approvalPage),
      }),
    };

    this.handler = new ServiceFunction(this, 'Handler', {
      ...commonFunctionProps(props),
      entry: props.entry,
      description: 'Idempotent MCP endpoint (streamable HTTP, stateless)',
      timeout: props.timeout ?? Duration.seconds(29),
      memorySize: props.memorySize ?? 1024,
      environment,
    });
    props.store.grantItems(this.handler.role, MCP_TABLE_ACTIONS);
    // GetSecretValue alone: grantRead adds DescribeSecret, which nothing here calls. A secret given by name only has
    // a partial ARN, which IAM matches with the six characters Secrets Manager appends (as CDK's own grants do).
    const secret = this.operationIdSecret;
    iam.Grant.addToPrincipal({
      grantee: this.handler.role,
      actions: ['secretsmanager:GetSecretValue'],
      resourceArns: [secret.secretFullArn ?? `${secret.secretArn}-??????`],
    });
    secret.encryptionKey?.grantDecrypt(this.handler.role);

    // Auth NONE: MCP clients send an OAuth bearer token in Authorization, the header SigV4 would need, so AWS_IAM
    // would lock every MCP client out. The function verifies the token before anything else runs.
    this.url = this.handler.function.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.NONE, invokeMode: lambda.InvokeMode.BUFFERED });
    Validations.of(this.url).acknowledge({
      id: 'IdempotentMcp-LambdaFunctionUrlAuth',
      reason:
        'MCP clients authenticate with OAuth bearer tokens in the Authorization header, so SigV4 (AWS_IAM) cannot be used: the function verifies the JWT (issuer, signature via JWKS, expiry, audience where the issuer sets one) before any MCP handling and answers 401 otherwise.',
    });
    if (!props.operationIdSecret) {
      Validations.of(this.operationIdSecret).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason:
          'Rotation would need a rotation function and two-key verification; the key only signs short-lived operation ids. Rotate by replacing the secret value (ids minted before then stop verifying).',
      });
    }
  }

  /** The MCP endpoint (streamable HTTP): the Function URL (which ends with '/') and the MCP path. */
  get mcpUrl(): string {
    return Fn.join('', [this.url.url, MCP_PATH.slice(1)]);
  }
}
