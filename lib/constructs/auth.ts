import { Aws, Duration, Fn, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as cognito from 'aws-cdk-lib/aws-cognito';
import { Construct } from 'constructs';
import { DEFAULT_TENANT_CLAIM } from '../../lambdas/config';

/**
 * An issuer the team already runs (Auth0, Okta, Entra ID, Keycloak, another Cognito pool...).
 *
 * @public
 */
export interface ExternalOidcSettings {
  /** The issuer URL (`iss` of its tokens). */
  readonly issuer: string;
  /**
   * The `aud` the issuer puts in access tokens for this API; tokens for another audience get 401. Required: without
   * it any token the issuer mints for any of its APIs would pass. Leave it unset only with `audienceNotRequiredReason`.
   * @default none (then `audienceNotRequiredReason` is required)
   */
  readonly audience?: string;
  /**
   * Why tokens of this issuer need no audience check (for example: the issuer serves this API only).
   * @default none
   */
  readonly audienceNotRequiredReason?: string;
  /**
   * Scopes every token must carry (403 insufficient_scope otherwise).
   * @default none
   */
  readonly requiredScopes?: string[];
  /** @default `${issuer}/.well-known/jwks.json` */
  readonly jwksUrl?: string;
  /**
   * The claim holding the tenant id.
   * @default 'tenant' (the functions' own default)
   */
  readonly tenantClaim?: string;
}

/**
 * How people sign in at the approval page: the issuer's OAuth client for the page (authorization code with PKCE).
 *
 * @public
 */
export interface ApprovalSignIn {
  /** The page's client id: a public client (no secret), authorization code grant, the page's callback URL registered. */
  readonly clientId: string;
  /** The issuer's authorization endpoint (`authorization_endpoint` of its OpenID configuration). */
  readonly authorizeUrl: string;
  /** The issuer's token endpoint (`token_endpoint`). */
  readonly tokenUrl: string;
  /**
   * Scopes the page asks for at sign-in.
   * @default ['openid']
   */
  readonly scopes?: string[];
  /**
   * The claim of a person's ID token holding their tenant.
   * @default the bearer tokens' tenant claim (`external.tenantClaim`)
   */
  readonly tenantClaim?: string;
}

/**
 * The custom attribute of the stack's pool that holds a person's tenant (their ID token's `custom:tenant`).
 */
const PERSON_TENANT_ATTRIBUTE = 'tenant';

/**
 * Who may call an endpoint (its `auth`): your OIDC issuer, or the endpoint's own user pool (its domain, resource
 * server, demo client, token validity).
 * @public
 */
export interface AuthSettings {
  /**
   * Verify tokens of an existing issuer instead of creating a Cognito user pool.
   * @default none: a new Cognito user pool issuing client-credentials tokens (tenant = app client id)
   */
  readonly external?: ExternalOidcSettings;
  /**
   * Cognito hosted domain prefix for the token endpoint.
   * @default `idempotent-mcp-<8 hex of the stack id>`
   */
  readonly cognitoDomainPrefix?: string;
  /**
   * Resource server identifier, also the scope prefix.
   * @default 'idempotent-mcp'
   */
  readonly resourceServerIdentifier?: string;
  /**
   * With the stack's pool: create one app client for a first tenant to try the endpoint with (client credentials,
   * with a secret; its client id is the tenant id). Tenants of your own are app clients you create
   * (docs/deploy.md); the reference stack asks for this one.
   * @default false: the pool has no client; no tenant exists until you create one
   */
  readonly demoClient?: boolean;
  /**
   * Access token lifetime for the demo client.
   * @default Duration.hours(1)
   */
  readonly accessTokenValidity?: Duration;
}

/** Props of `Auth`: the endpoint's `auth` settings, and the approval page's sign-in, which the endpoint wires. */
export interface AuthProps extends AuthSettings {
  /**
   * With the stack's pool: people sign in at the approval page, through the pool's managed login, with an app client
   * of their own (authorization code with PKCE, no secret, `openid` only, so its tokens never carry the tools scope).
   * `callbackUrl` is the page's callback (`<page base>/approvals/callback`). Refused with `external`, whose people
   * sign in at that issuer.
   * @default none: the pool has no client for people
   */
  readonly approvalPage?: { readonly callbackUrl: string };
}

/** What the MCP function needs to verify bearer tokens (the AUTH_* environment). */
export interface TokenVerification {
  issuer: string;
  jwksUrl: string;
  /** Unset when the issuer's access tokens carry no `aud` (Cognito client credentials). */
  audience?: string;
  tenantClaim: string;
  /** Scopes every token must carry: with Cognito, the stack's tools scope. */
  requiredScopes: string[];
}

const TOOLS_SCOPE = 'tools';

/**
 * Who may call the endpoint. By default a Cognito user pool that issues OAuth 2.0 client-credentials access tokens:
 * one app client per tenant, the tenant being the token's `client_id` (Cognito puts `client_id`, `scope`, `iss`
 * and `token_use` in those tokens, but no `aud`; the pool is this stack's own, so its issuer pins the audience).
 * Or an existing OIDC issuer, read from props or context.
 */
export class Auth extends Construct {
  readonly verification: TokenVerification;
  readonly userPool?: cognito.UserPool;
  /** The demo tenant's app client; only with `demoClient`. */
  readonly client?: cognito.UserPoolClient;
  readonly domain?: cognito.UserPoolDomain;
  /** The scope a client-credentials token request asks for, e.g. `idempotent-mcp/tools`. */
  readonly scope?: string;
  /** The approval page's client for people; only with `approvalPage`. */
  readonly approvalClient?: cognito.UserPoolClient;
  /** How people sign in at the approval page with this pool; only with `approvalPage`. */
  readonly approvalSignIn?: ApprovalSignIn;

  constructor(scope: Construct, id: string, props: AuthProps = {}) {
    super(scope, id);
    if (props.external) {
      if (props.approvalPage)
        throw new Error(
          "auth.approvalPage is for the stack's own Cognito pool: with auth.external, people sign in at your issuer (give its client as approvalPage.signIn)",
        );
      if (props.demoClient)
        throw new Error("auth.demoClient is for the stack's own Cognito pool: with auth.external, your issuer makes the clients");
      const { issuer, audience, jwksUrl, tenantClaim, audienceNotRequiredReason, requiredScopes } = props.external;
      if (!audience && !audienceNotRequiredReason?.trim())
        throw new Error(
          'auth.external.audience (context "authAudience") is required with an external issuer: without it, a token the issuer ' +
            'mints for any other API would pass. If this issuer serves this API only, set auth.external.audienceNotRequiredReason ' +
            '(context "authAudienceNotRequiredReason") to say so.',
        );
      const trimmed = issuer.replace(/\/+$/, '');
      this.verification = {
        issuer,
        audience,
        jwksUrl: jwksUrl ?? `${trimmed}/.well-known/jwks.json`,
        tenantClaim: tenantClaim ?? DEFAULT_TENANT_CLAIM,
        requiredScopes: requiredScopes ?? [],
      };
      return;
    }

    const people = props.approvalPage;
    this.userPool = new cognito.UserPool(this, 'UserPool', {
      // Nobody signs up: machines get app clients, and the people who approve are created by an administrator.
      selfSignUpEnabled: false,
      // Managed login (the sign-in pages people see) needs Essentials; Lite offers only the classic hosted UI.
      featurePlan: people ? cognito.FeaturePlan.ESSENTIALS : cognito.FeaturePlan.LITE,
      // A person's tenant, set once by the administrator who creates them: immutable, so nobody moves tenants.
      customAttributes: people
        ? { [PERSON_TENANT_ATTRIBUTE]: new cognito.StringAttribute({ minLen: 2, maxLen: 256, mutable: false }) }
        : undefined,
      // Everyone who signs in approves payments: a second factor always.
      mfa: cognito.Mfa.REQUIRED,
      mfaSecondFactor: { otp: true, sms: false },
      passwordPolicy: { minLength: 12, requireDigits: true, requireLowercase: true, requireUppercase: true, requireSymbols: true },
      accountRecovery: cognito.AccountRecovery.NONE,
      // No personal data lives here; tenants' records live in the (retained) table, keyed by client id.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const identifier = props.resourceServerIdentifier ?? 'idempotent-mcp';
    const toolsScope = new cognito.ResourceServerScope({ scopeName: TOOLS_SCOPE, scopeDescription: 'Call the MCP tools' });
    const resourceServer = this.userPool.addResourceServer('ResourceServer', {
      identifier,
      userPoolResourceServerName: 'Idempotent MCP endpoint',
      scopes: [toolsScope],
    });
    this.scope = `${identifier}/${TOOLS_SCOPE}`;
    if (props.demoClient) {
      this.client = this.userPool.addClient('DemoTenantClient', {
        generateSecret: true,
        oAuth: {
          flows: { clientCredentials: true },
          scopes: [cognito.OAuthScope.resourceServer(resourceServer, toolsScope)],
        },
        accessTokenValidity: props.accessTokenValidity ?? Duration.hours(1),
        preventUserExistenceErrors: true,
        enableTokenRevocation: true,
      });
      // Machines never sign in as users: no password, SRP or custom flows (refresh is always listed by Cognito).
      (this.client.node.defaultChild as cognito.CfnUserPoolClient).explicitAuthFlows = ['ALLOW_REFRESH_TOKEN_AUTH'];
    }
    // Globally unique per region, stable for this stack, and without the account id in a public URL.
    const stackIdSuffix = Fn.select(0, Fn.split('-', Fn.select(2, Fn.split('/', Aws.STACK_ID))));
    this.domain = this.userPool.addDomain('Domain', {
      cognitoDomain: { domainPrefix: props.cognitoDomainPrefix ?? Fn.join('-', ['idempotent-mcp', stackIdSuffix]) },
      managedLoginVersion: people ? cognito.ManagedLoginVersion.NEWER_MANAGED_LOGIN : undefined,
    });
    if (people) {
      this.approvalClient = this.userPool.addClient('ApprovalPageClient', {
        // A public client: the page proves the code is its own with PKCE (S256), no secret to keep.
        generateSecret: false,
        oAuth: { flows: { authorizationCodeGrant: true }, scopes: [cognito.OAuthScope.OPENID], callbackUrls: [people.callbackUrl] },
        supportedIdentityProviders: [cognito.UserPoolClientIdentityProvider.COGNITO],
        // The ID token carries the person's tenant; nothing else of them is read.
        readAttributes: new cognito.ClientAttributes().withCustomAttributes(PERSON_TENANT_ATTRIBUTE),
        // The page keeps no token: its own session cookie lasts minutes, and these are the shortest Cognito allows.
        idTokenValidity: Duration.minutes(5),
        accessTokenValidity: Duration.minutes(5),
        refreshTokenValidity: Duration.hours(1),
        preventUserExistenceErrors: true,
        enableTokenRevocation: true,
      });
      (this.approvalClient.node.defaultChild as cognito.CfnUserPoolClient).explicitAuthFlows = ['ALLOW_REFRESH_TOKEN_AUTH'];
      // Managed login shows a client's pages only once it has a style: Cognito's own.
      new cognito.CfnManagedLoginBranding(this, 'ApprovalPageLoginStyle', {
        userPoolId: this.userPool.userPoolId,
        clientId: this.approvalClient.userPoolClientId,
        useCognitoProvidedValues: true,
      });
      const domainUrl = this.domain.baseUrl();
      this.approvalSignIn = {
        clientId: this.approvalClient.userPoolClientId,
        authorizeUrl: `${domainUrl}/oauth2/authorize`,
        tokenUrl: `${domainUrl}/oauth2/token`,
        scopes: ['openid'],
        tenantClaim: `custom:${PERSON_TENANT_ATTRIBUTE}`,
      };
    }
    this.verification = {
      issuer: this.userPool.userPoolProviderUrl,
      jwksUrl: `${this.userPool.userPoolProviderUrl}/.well-known/jwks.json`,
      tenantClaim: 'client_id',
      // Cognito puts the granted scopes in `scope`: a client of this pool without the tools scope gets 403.
      requiredScopes: [this.scope],
    };

    Validations.of(this.userPool).acknowledge({
      id: 'AwsSolutions-COG8',
      reason: people
        ? 'The Plus plan adds threat protection for user sign-ins at a price per person; the only people here are the few approvers an administrator creates (no self sign-up), each with a required TOTP second factor, and their sign-in only opens the approval page.'
        : 'The Plus plan adds threat protection for user sign-ins; this pool has no users and only issues client-credentials tokens to app clients, whose secrets are the credential.',
    });
  }

  /** The OAuth 2.0 token endpoint of the Cognito domain (client-credentials grant). */
  get tokenEndpoint(): string | undefined {
    return this.domain ? `${this.domain.baseUrl()}/oauth2/token` : undefined;
  }

  /** The CLI command that prints the demo client's secret (never put into an output or the template). */
  clientSecretCommand(): string | undefined {
    if (!this.userPool || !this.client) return undefined;
    return Fn.join('', [
      'aws cognito-idp describe-user-pool-client --region ',
      Stack.of(this).region,
      ' --user-pool-id ',
      this.userPool.userPoolId,
      ' --client-id ',
      this.client.userPoolClientId,
      ' --query UserPoolClient.ClientSecret --output text',
    ]);
  }
}
