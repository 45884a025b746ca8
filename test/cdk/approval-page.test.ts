import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotentMcpEndpoint, type IdempotentMcpEndpointProps } from 'idempotent-mcp/cdk';
import { EnvVars, loadConfig } from '../../lambdas/config';
import { read as readEnv, type Env, type EnvVar } from '../../lambdas/env-var';
import { approvalId } from '../../lambdas/confirmation/core/approval';
import { loadDevIssuer } from '../../lambdas/auth/dev-issuer';
import { createApprovalPage } from '../../lambdas/http/approval-page';
import { APPROVAL_CALLBACK_PATH, APPROVALS_PATH } from '../../lambdas/core/endpoint-paths';
import { Hono } from 'hono/tiny';
import { ContextError, settingsFromContext } from '../../reference/cdk/context';
import type { LocalStack } from '../support/local-stack';
import { rawToolCall, startTestStack } from '../support/mcp';
import { paymentArgs } from '../support/side-effects';
import { logicalId, partsOf, synthStack, teamProject, templateApp } from './support';

/**
 * The deployed approval page: the stack serves it (an HTTP API of its own, or the custom domain of publicBaseUrl),
 * people sign in at the stack's Cognito pool through managed login (or at the team's own issuer), and the MCP
 * function is told all of it through the declared APPROVAL_* variables, without a dependency cycle.
 */
type Resources = Record<string, { Type: string; Properties: any; DependsOn?: string | string[] }>;
const resourcesOf = (template: Template) => template.toJSON().Resources as Resources;
const ofType = (resources: Resources, type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
const mcpEnv = (template: Template, stack: { endpoint: IdempotentMcpEndpoint }): Record<string, unknown> =>
  resourcesOf(template)[logicalId(stack.endpoint.mcpFunction)]!.Properties.Environment.Variables;
const nameOf = (key: keyof typeof EnvVars) => EnvVars[key].name;

/** Every logical id a resource refers to (Ref, Fn::GetAtt, Fn::Sub, DependsOn): CloudFormation's dependency graph. */
function referencesOf(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const item of value) referencesOf(item, into);
  else if (value && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      if (key === 'Ref' && typeof inner === 'string') into.add(inner);
      else if (key === 'Fn::GetAtt') into.add(Array.isArray(inner) ? String(inner[0]) : String(inner).split('.')[0]!);
      else if (key === 'Fn::Sub') for (const [, name] of JSON.stringify(inner).matchAll(/\$\{([A-Za-z0-9]+)[.}]/g)) into.add(name!);
      referencesOf(inner, into);
    }
  }
  return into;
}

/** A cycle among the resources, as the chain of logical ids, or undefined: what CloudFormation refuses to deploy. */
function dependencyCycle(resources: Resources): string[] | undefined {
  const edges = new Map<string, string[]>();
  for (const [id, resource] of Object.entries(resources)) {
    const refs = referencesOf({ p: resource.Properties, d: [resource.DependsOn ?? []].flat().map((Ref) => ({ Ref })) });
    edges.set(
      id,
      [...refs].filter((ref) => ref in resources),
    );
  }
  const state = new Map<string, 'open' | 'done'>();
  const visit = (id: string, path: string[]): string[] | undefined => {
    if (state.get(id) === 'done') return undefined;
    if (state.get(id) === 'open') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'open');
    for (const next of edges.get(id)!) {
      const cycle = visit(next, [...path, id]);
      if (cycle) return cycle;
    }
    state.set(id, 'done');
    return undefined;
  };
  for (const id of edges.keys()) {
    const cycle = visit(id, []);
    if (cycle) return cycle;
  }
  return undefined;
}

/** The function's environment as it reads it once deployed: references replaced by values of that shape. */
const REGION = 'eu-west-1';
function deployedEnv(variables: Record<string, unknown>, values: Record<string, string>): Env {
  const resolve = (value: unknown): string => {
    if (typeof value === 'string') return value;
    const node = value as Record<string, any>;
    if (node.Ref === 'AWS::Region') return REGION;
    if (node.Ref === 'AWS::URLSuffix') return 'amazonaws.com';
    if (node.Ref) return values[node.Ref] ?? `ref-${String(node.Ref).toLowerCase()}`;
    if (node['Fn::GetAtt'])
      return values[node['Fn::GetAtt'].join('.')] ?? `https://attr-${String(node['Fn::GetAtt'][0]).toLowerCase()}.example.com`;
    if (node['Fn::Join']) return (node['Fn::Join'][1] as unknown[]).map(resolve).join(node['Fn::Join'][0]);
    throw new Error(`no value for ${JSON.stringify(value)}`);
  };
  return Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, resolve(value)]));
}

/** Whether an HTTP API route key (`GET /a/{proxy+}`) takes this request: a greedy `{proxy+}` needs one segment or more. */
function httpApiRouteMatches(routeKey: string, method: string, path: string): boolean {
  const [routeMethod, routePath] = routeKey.split(' ') as [string, string];
  if (routeMethod !== method && routeMethod !== 'ANY') return false;
  const pattern = routePath
    .replace(/[.*?^$()|[\]\\]/g, '\\$&')
    .replace(/\/\{[^}/]+\+\}$/, '/.+')
    .replace(/\{[^}/]+\}/g, '[^/]+');
  return new RegExp(`^${pattern}$`).test(path);
}

/** A page whose sign-in is at an issuer no test reaches: enough for what it answers before anyone signs in. */
const pageServices = () => ({
  config: {
    auth: {
      mode: 'oidc' as const,
      issuer: 'https://pool.example.com',
      jwksUrl: 'https://pool.example.com/jwks',
      tenantClaim: 'client_id',
      requiredScopes: [],
    },
    approvals: {
      ttlSeconds: 900,
      signIn: {
        clientId: 'page-client',
        authorizeUrl: 'https://pool.example.com/oauth2/authorize',
        tokenUrl: 'https://pool.example.com/oauth2/token',
        scopes: ['openid'],
      },
    },
  },
  approvals: {} as never,
  signingSecret: async () => 's'.repeat(32),
  clock: () => Date.now(),
  logger: { info: () => {}, warn: () => {} },
});

describe('the reference stack, by default: the page on its own HTTP API, people at the Cognito pool', () => {
  const { stack, template } = synthStack();
  const resources = resourcesOf(template);
  const endpoint = stack.endpoint;
  const apiId = logicalId(partsOf(endpoint).approvalPageApi!.api);
  const apiEndpoint = { 'Fn::GetAtt': [apiId, 'ApiEndpoint'] };
  const poolId = logicalId(endpoint.userPool!);
  const pageClientId = logicalId(partsOf(endpoint).auth.approvalClient!);
  const domainId = logicalId(partsOf(endpoint).auth.domain!);
  const env = mcpEnv(template, stack);

  it('routes GET and POST under /approvals/, and GET of /approvals itself, to the MCP function, which serves the page', () => {
    const routes = ofType(resources, 'AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties);
    expect(routes.map((r) => r.RouteKey).sort()).toEqual(['GET /approvals', 'GET /approvals/{proxy+}', 'POST /approvals/{proxy+}']);
    for (const route of routes) {
      expect(route.ApiId).toEqual({ Ref: apiId });
      const integrationId = route.Target['Fn::Join'][1][1].Ref as string;
      const integration = resources[integrationId]!.Properties;
      expect(integration).toMatchObject({ IntegrationType: 'AWS_PROXY', PayloadFormatVersion: '2.0' });
      expect(integration.IntegrationUri).toEqual({ 'Fn::GetAtt': [logicalId(endpoint.mcpFunction), 'Arn'] });
    }
    // Served at the root of the API (no stage in the path), throttled, with an access log.
    const [[, stage]] = ofType(resources, 'AWS::ApiGatewayV2::Stage') as [[string, Resources[string]]];
    expect(stage.Properties).toMatchObject({
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 20, ThrottlingBurstLimit: 40 },
    });
    expect(stage.Properties.AccessLogSettings.Format).not.toMatch(/querystring|\$context\.path/i);
  });

  it('gives people an app client of their own: code grant with PKCE, no secret, openid only, the page callback exactly', () => {
    const client = resources[pageClientId]!.Properties;
    expect(client.UserPoolId).toEqual({ Ref: poolId });
    expect(client.GenerateSecret).toBeFalsy();
    expect(client.AllowedOAuthFlows).toEqual(['code']);
    expect(client.AllowedOAuthFlowsUserPoolClient).toBe(true);
    // openid only: a person's access token never carries the tools scope the MCP endpoint requires.
    expect(client.AllowedOAuthScopes).toEqual(['openid']);
    expect(client.CallbackURLs).toEqual([{ 'Fn::Join': ['', [apiEndpoint, APPROVAL_CALLBACK_PATH]] }]);
    expect(client.SupportedIdentityProviders).toEqual(['COGNITO']);
    expect(client.ExplicitAuthFlows).toEqual(['ALLOW_REFRESH_TOKEN_AUTH']);
    expect(client.ReadAttributes).toEqual(['custom:tenant']);
    // The agents' client is unchanged: client credentials with the tools scope, and a secret.
    const machine = resources[logicalId(partsOf(endpoint).auth.client!)]!.Properties;
    expect(machine).toMatchObject({ AllowedOAuthFlows: ['client_credentials'], GenerateSecret: true });
  });

  it("signs people in through the pool's managed login, with a second factor and a tenant an administrator sets once", () => {
    expect(resources[domainId]!.Properties).toMatchObject({ UserPoolId: { Ref: poolId }, ManagedLoginVersion: 2 });
    const [[, style]] = ofType(resources, 'AWS::Cognito::ManagedLoginBranding') as [[string, Resources[string]]];
    expect(style.Properties).toEqual({ UserPoolId: { Ref: poolId }, ClientId: { Ref: pageClientId }, UseCognitoProvidedValues: true });
    const pool = resources[poolId]!.Properties;
    // Managed login needs Essentials (Lite has only the classic hosted UI).
    expect(pool.UserPoolTier).toBe('ESSENTIALS');
    expect(pool.MfaConfiguration).toBe('ON');
    expect(pool.AdminCreateUserConfig).toMatchObject({ AllowAdminCreateUserOnly: true });
    expect(pool.Schema).toEqual([expect.objectContaining({ Name: 'tenant', AttributeDataType: 'String', Mutable: false })]);
  });

  it('tells the MCP function the page settings through the declared variables', () => {
    const domainUrl = (path: string) => ({
      'Fn::Join': ['', ['https://', { Ref: domainId }, '.auth.', { Ref: 'AWS::Region' }, `.amazoncognito.com${path}`]],
    });
    expect(env[nameOf('approvalClientId')]).toEqual({ Ref: pageClientId });
    expect(env[nameOf('approvalAuthorizeUrl')]).toEqual(domainUrl('/oauth2/authorize'));
    expect(env[nameOf('approvalTokenUrl')]).toEqual(domainUrl('/oauth2/token'));
    expect(env[nameOf('approvalBaseUrl')]).toEqual(apiEndpoint);
    expect(env[nameOf('approvalTenantClaim')]).toBe('custom:tenant');
    expect(env[nameOf('approvalScopes')]).toBe('openid');
    // The default link lifetime is the functions' own: not written.
    expect(env[nameOf('approvalTtlSeconds')]).toBeUndefined();
  });

  it('has no dependency cycle (the callback names the API, the function names the client, the routes name the function)', () => {
    expect(dependencyCycle(resources)).toBeUndefined();
    // The check finds one where there is one.
    const looped: Resources = { ...resources, [apiId]: { ...resources[apiId]!, DependsOn: [logicalId(endpoint.mcpFunction)] } };
    expect(dependencyCycle(looped)).toBeDefined();
  });

  it("routes the URL it outputs as ApprovalPageUrl (and the callback) to the function, which answers the page's own URL", async () => {
    const routeKeys = ofType(resources, 'AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties.RouteKey as string);
    const outputs = template.toJSON().Outputs;
    for (const name of ['ApprovalPageUrl', 'ApprovalCallbackUrl']) {
      const [first, path] = outputs[name].Value['Fn::Join'][1];
      expect(first).toEqual(apiEndpoint);
      expect(
        routeKeys.filter((key) => httpApiRouteMatches(key, 'GET', path)),
        `${name} (${path})`,
      ).not.toEqual([]);
    }
    // The function answers there: a page saying where the links are, not the API's or the app's 404.
    const pageUrl: string = outputs.ApprovalPageUrl.Value['Fn::Join'][1][1];
    const app = new Hono().route(APPROVALS_PATH, createApprovalPage(pageServices()));
    const response = await app.request(`https://page.example.com${pageUrl}`);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('https://page.example.com/approvals/&lt;id&gt;');
  });

  it('outputs where the page is, its callback and its client', () => {
    const outputs = template.toJSON().Outputs;
    expect(outputs.ApprovalPageUrl.Value).toEqual({ 'Fn::Join': ['', [apiEndpoint, '/approvals']] });
    expect(outputs.ApprovalCallbackUrl.Value).toEqual({ 'Fn::Join': ['', [apiEndpoint, APPROVAL_CALLBACK_PATH]] });
    expect(outputs.ApprovalClientId.Value).toEqual({ Ref: pageClientId });
  });

  it("is a configuration the function accepts: the page sends a visitor to the pool's managed login with PKCE S256", async () => {
    const base = 'https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com';
    const deployed = deployedEnv(env, {
      [`${apiId}.ApiEndpoint`]: base,
      [pageClientId]: '4k8qexampleclientid0000000',
      [domainId]: 'idempotent-mcp-1a2b3c4d',
    });
    const config = loadConfig({ ...deployed, AWS_LAMBDA_FUNCTION_NAME: 'mcp', AWS_SESSION_TOKEN: 'session' });
    expect(config.auth).toMatchObject({ mode: 'oidc', tenantClaim: 'client_id' });
    expect(config.approvals).toEqual({
      ttlSeconds: 900,
      baseUrl: base,
      signIn: {
        clientId: '4k8qexampleclientid0000000',
        authorizeUrl: `https://idempotent-mcp-1a2b3c4d.auth.${REGION}.amazoncognito.com/oauth2/authorize`,
        tokenUrl: `https://idempotent-mcp-1a2b3c4d.auth.${REGION}.amazoncognito.com/oauth2/token`,
        scopes: ['openid'],
        tenantClaim: 'custom:tenant',
      },
    });
    const page = createApprovalPage({
      config,
      approvals: {} as never, // not reached: nobody is signed in yet
      signingSecret: async () => 'x'.repeat(32),
      clock: () => Date.now(),
      logger: { info: () => {}, warn: () => {} },
    });
    const id = approvalId({ tenant: '4k8qexampleclientid0000000', tool: 'request_payment', idempotencyKey: 'op-1' }, 'n'.repeat(22));
    const response = await page.request(`/${id}`, { headers: { host: 'a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com' } });
    expect(response.status).toBe(302);
    const target = new URL(response.headers.get('location')!);
    expect(`${target.origin}${target.pathname}`).toBe(config.approvals.signIn!.authorizeUrl);
    expect(Object.fromEntries(target.searchParams)).toMatchObject({
      response_type: 'code',
      client_id: '4k8qexampleclientid0000000',
      redirect_uri: `${base}${APPROVAL_CALLBACK_PATH}`,
      scope: 'openid',
      code_challenge_method: 'S256',
    });
    expect(target.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('the page on the custom domain of publicBaseUrl', () => {
  const { stack, template } = synthStack({ publicBaseUrl: 'https://mcp.example.com' });
  const resources = resourcesOf(template);
  const env = mcpEnv(template, stack);

  it("registers that domain's callback, needs no HTTP API, and leaves the links to PUBLIC_BASE_URL", () => {
    expect(resources[logicalId(partsOf(stack.endpoint).auth.approvalClient!)]!.Properties.CallbackURLs).toEqual([
      'https://mcp.example.com/approvals/callback',
    ]);
    expect(ofType(resources, 'AWS::ApiGatewayV2::Api')).toEqual([]);
    expect(env[nameOf('publicBaseUrl')]).toBe('https://mcp.example.com');
    expect(env[nameOf('approvalBaseUrl')]).toBeUndefined();
    expect(env[nameOf('approvalClientId')]).toEqual({ Ref: logicalId(partsOf(stack.endpoint).auth.approvalClient!) });
    expect(dependencyCycle(resources)).toBeUndefined();
  });
});

describe('an external issuer', () => {
  const issuer = { authIssuer: 'https://login.example.com', authAudience: 'mcp' };
  const signIn = {
    approvalClientId: 'approval-page',
    approvalAuthorizeUrl: 'https://login.example.com/oauth2/authorize',
    approvalTokenUrl: 'https://login.example.com/oauth2/token',
    approvalTenantClaim: 'org_id',
    approvalLinkTtlSeconds: '600',
  };

  it('with its client for the page: the function gets that client and those endpoints; no pool, the callback is output', () => {
    const { stack, template } = synthStack({ ...issuer, ...signIn });
    const resources = resourcesOf(template);
    const env = readEnvOf(mcpEnv(template, stack));
    expect(ofType(resources, 'AWS::Cognito::UserPool')).toEqual([]);
    expect(env).toMatchObject({
      approvalClientId: 'approval-page',
      approvalAuthorizeUrl: 'https://login.example.com/oauth2/authorize',
      approvalTokenUrl: 'https://login.example.com/oauth2/token',
      approvalTenantClaim: 'org_id',
      approvalTtlSeconds: 600,
      authIssuer: 'https://login.example.com',
    });
    const apiId = logicalId(partsOf(stack.endpoint).approvalPageApi!.api);
    expect(template.toJSON().Outputs.ApprovalCallbackUrl.Value).toEqual({
      'Fn::Join': ['', [{ 'Fn::GetAtt': [apiId, 'ApiEndpoint'] }, APPROVAL_CALLBACK_PATH]],
    });
    expect(ofType(resources, 'AWS::ApiGatewayV2::Route')).toHaveLength(3);
    expect(dependencyCycle(resources)).toBeUndefined();
  });

  it('without one: no page, and the function has no sign-in (approval tools answer CONFIRMATION_UNAVAILABLE)', () => {
    const { stack, template } = synthStack(issuer);
    expect(ofType(resourcesOf(template), 'AWS::ApiGatewayV2::Api')).toEqual([]);
    const env = mcpEnv(template, stack);
    expect(Object.keys(env).filter((name) => name.startsWith('APPROVAL_'))).toEqual([]);
    expect(template.toJSON().Outputs.ApprovalPageUrl).toBeUndefined();
  });
});

/** The environment's values by declared key, as the functions read them. */
function readEnvOf(variables: Record<string, unknown>) {
  const env = Object.fromEntries(Object.entries(variables).filter(([, value]) => typeof value === 'string')) as Env;
  return Object.fromEntries(Object.entries(EnvVars).map(([key, variable]) => [key, readEnv(env, variable as EnvVar<unknown>)]));
}

describe('approvalPage=false', () => {
  it('serves no page: no API, no client for people, no APPROVAL_* variable', () => {
    const { stack, template } = synthStack({ approvalPage: 'false' });
    const resources = resourcesOf(template);
    expect(ofType(resources, 'AWS::ApiGatewayV2::Api')).toEqual([]);
    expect(ofType(resources, 'AWS::Cognito::UserPoolClient')).toHaveLength(1);
    expect(Object.keys(mcpEnv(template, stack)).filter((name) => name.startsWith('APPROVAL_'))).toEqual([]);
  });
});

describe('approval context settings are validated at synth', () => {
  const refusal = (context: Record<string, unknown>) => {
    try {
      settingsFromContext(context);
      return 'accepted';
    } catch (err) {
      expect(err).toBeInstanceOf(ContextError);
      return (err as Error).message;
    }
  };
  const external = { authIssuer: 'https://login.example.com', authAudience: 'mcp' };
  const three = {
    approvalClientId: 'page',
    approvalAuthorizeUrl: 'https://login.example.com/authorize',
    approvalTokenUrl: 'https://login.example.com/token',
  };

  it('refuses a bad value in one sentence naming the key', () => {
    expect(refusal({ approvalPage: 'yes' })).toBe('context "approvalPage" must be true or false (got "yes")');
    expect(refusal({ ...external, ...three, approvalAuthorizeUrl: 'http://login.example.com/authorize' })).toMatch(
      /^context "approvalAuthorizeUrl" must be a URL starting with https:\/\//,
    );
    expect(refusal({ ...external, ...three, approvalClientId: 'a page' })).toMatch(
      /^context "approvalClientId" must be an OAuth client id/,
    );
    expect(refusal({ ...external, ...three, approvalScopes: 'openid "x"' })).toMatch(
      /^context "approvalScopes" must be space-separated OAuth scopes/,
    );
    expect(refusal({ approvalLinkTtlSeconds: '0' })).toMatch(/^context "approvalLinkTtlSeconds" must be a positive whole number/);
    expect(refusal({ approvalLinkTtlSeconds: '86401' })).toMatch(
      /^context "approvalLinkTtlSeconds" must be a whole number of seconds from 1 to 86400/,
    );
  });

  it('refuses settings that do not go together', () => {
    expect(refusal(three)).toMatch(/^context "approvalClientId" needs "authIssuer": with the stack's own Cognito pool/);
    expect(refusal({ ...external, approvalClientId: 'page' })).toMatch(
      /^context "approvalClientId", "approvalAuthorizeUrl" and "approvalTokenUrl" go together/,
    );
    expect(refusal({ ...external, approvalPage: 'true' })).toMatch(/^context "approvalPage" with "authIssuer" needs "approvalClientId"/);
    expect(refusal({ ...external, approvalTenantClaim: 'org' })).toMatch(/^context "approvalTenantClaim" needs "approvalClientId"/);
  });

  it('accepts the valid combinations', () => {
    expect(settingsFromContext({ ...external, ...three, approvalScopes: 'openid profile' }).props.approvalPage?.signIn).toEqual({
      clientId: 'page',
      authorizeUrl: three.approvalAuthorizeUrl,
      tokenUrl: three.approvalTokenUrl,
      scopes: ['openid', 'profile'],
      tenantClaim: undefined,
    });
    expect(settingsFromContext({ approvalLinkTtlSeconds: '600' }).props.approvalPage?.linkLifetime?.toSeconds()).toBe(600);
    expect(settingsFromContext({ approvalPage: 'false' }).props.approvalPage?.enabled).toBe(false);
  });
});

describe('IdempotentMcpEndpoint used directly', () => {
  const project = teamProject();
  afterAll(() => project.remove());
  const endpointStack = (props: Partial<IdempotentMcpEndpointProps>) => {
    const app = templateApp();
    const stack = new Stack(app, 'Team');
    const endpoint = new IdempotentMcpEndpoint(stack, 'Endpoint', { tools: project.file('tools.ts'), ...props });
    return { endpoint, template: Template.fromStack(stack) };
  };
  const envOf = ({ endpoint, template }: ReturnType<typeof endpointStack>) =>
    resourcesOf(template)[logicalId(endpoint.mcpFunction)]!.Properties.Environment.Variables as Record<string, unknown>;
  const external = { issuer: 'https://id.example.com', audience: 'mcp' };
  const ownSignIn = { clientId: 'page', authorizeUrl: 'https://id.example.com/authorize', tokenUrl: 'https://id.example.com/token' };

  it('turns the page off', () => {
    const team = endpointStack({ approvalPage: { enabled: false } });
    expect(team.endpoint.approvalPageUrl).toBeUndefined();
    expect(partsOf(team.endpoint).auth.approvalClient).toBeUndefined();
    expect(Object.keys(envOf(team)).filter((name) => name.startsWith('APPROVAL_'))).toEqual([]);
  });

  it('brings its own issuer and its client for the page', () => {
    const team = endpointStack({ auth: { external }, approvalPage: { signIn: ownSignIn, linkLifetime: Duration.minutes(5) } });
    expect(envOf(team)).toMatchObject({
      APPROVAL_CLIENT_ID: 'page',
      APPROVAL_AUTHORIZE_URL: ownSignIn.authorizeUrl,
      APPROVAL_TOKEN_URL: ownSignIn.tokenUrl,
      APPROVAL_TTL_SECONDS: '300',
    });
    expect(dependencyCycle(resourcesOf(team.template))).toBeUndefined();
  });

  it('refuses settings that cannot work, naming the prop', () => {
    expect(() => endpointStack({ approvalPage: { signIn: ownSignIn } })).toThrow(/approvalPage.signIn needs auth.external/);
    expect(() => endpointStack({ auth: { external }, approvalPage: { enabled: true } })).toThrow(
      /approvalPage.enabled with auth.external needs approvalPage.signIn/,
    );
    expect(() =>
      endpointStack({ auth: { external }, approvalPage: { signIn: { ...ownSignIn, tokenUrl: 'http://id.example.com/token' } } }),
    ).toThrow(/approvalPage.signIn.tokenUrl must be an https URL/);
    expect(() => endpointStack({ approvalPage: { linkLifetime: Duration.days(2) } })).toThrow(
      /approvalPage.linkLifetime must be whole seconds from 1 to 86400/,
    );
    expect(() => endpointStack({ publicBaseUrl: 'mcp.example.com' })).toThrow(/publicBaseUrl must be an https URL/);
  });
});

describe("deployed settings on the running endpoint: the link points at the page's own address", () => {
  const PAGE = 'https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com';
  const AUTHORIZE = 'https://idempotent-mcp-1a2b3c4d.auth.eu-west-1.amazoncognito.com/oauth2/authorize';
  let stack: LocalStack;
  beforeAll(async () => {
    stack = await startTestStack({
      env: {
        CONFIRMATION_OPT_OUT_TOOLS: '',
        [nameOf('approvalBaseUrl')]: PAGE,
        [nameOf('approvalClientId')]: 'page-client',
        [nameOf('approvalAuthorizeUrl')]: AUTHORIZE,
        [nameOf('approvalTokenUrl')]: 'https://idempotent-mcp-1a2b3c4d.auth.eu-west-1.amazoncognito.com/oauth2/token',
      },
    });
  });
  afterAll(() => stack?.stop());

  it("a 2026-07-28 client gets a link on the page's address; the page sends the person to the issuer, back to that address", async () => {
    const token = await stack.tokenFor('tenant-deployed');
    const call = (name: string, args: Record<string, unknown>) => rawToolCall(stack.mcpUrl, token, name, args);
    const operationId = (await call('issue_operation_id', { tool: 'request_payment' })).structuredContent!.operation_id as string;
    const answer = await call('request_payment', paymentArgs(operationId));
    const link = new URL(answer.inputRequests!.confirm.params.url);
    expect(link.origin).toBe(PAGE);
    expect(link.pathname).toMatch(/^\/approvals\/[A-Za-z0-9_.-]+$/);

    // The HTTP API hands the same path to the same app: here, the local server.
    const response = await fetch(`${stack.url}${link.pathname}`, { redirect: 'manual' });
    expect(response.status).toBe(302);
    const target = new URL(response.headers.get('location')!);
    expect(`${target.origin}${target.pathname}`).toBe(AUTHORIZE);
    expect(target.searchParams.get('redirect_uri')).toBe(`${PAGE}${APPROVAL_CALLBACK_PATH}`);
    expect(target.searchParams.get('code_challenge_method')).toBe('S256');
    expect(target.searchParams.get('client_id')).toBe('page-client');
  });
});

describe('the form fallback, deployed', () => {
  it('reaches the function from context (CONFIRMATION_FORM_FALLBACK_TOOLS), and only tool names pass', () => {
    const { stack, template } = synthStack({ confirmationFormFallback: 'request_payment' });
    expect(readEnvOf(mcpEnv(template, stack)).confirmationFormFallback).toEqual(['request_payment']);
    const plain = synthStack();
    expect(mcpEnv(plain.template, plain.stack)[nameOf('confirmationFormFallback')]).toBeUndefined();
    expect(() => settingsFromContext({ confirmationFormFallback: 'pay ment' })).toThrow(
      /^context "confirmationFormFallback" must be a comma-separated list of tool names/,
    );
  });
});

describe("a person's tenant from their own claim (the stack's pool: custom:tenant), the agents' from client_id", () => {
  const dir = mkdtempSync(join(tmpdir(), 'approval-claim-'));
  const ISSUER = 'urn:test:pool';
  let server: Server;
  let tokenUrl: string;
  let personTenant = 'tenant-a';
  beforeAll(async () => {
    // The pool's token endpoint over real HTTP: the person's ID token names their tenant in custom:tenant, as
    // Cognito puts the custom attribute, and carries no client_id (only access tokens do).
    const people = await loadDevIssuer({ dir, issuer: ISSUER, audience: 'unused', tenantClaim: 'custom:tenant' });
    server = createServer(async (_request, response) => {
      const idToken = await people.sign({
        tenant: personTenant,
        subject: 'alice',
        audience: 'page-client',
        scope: '',
        ttlSeconds: 300,
        extra: { token_use: 'id' },
      });
      response.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ id_token: idToken }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`;
  });
  afterAll(() => {
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Opens the approval of `tenant` as a visitor who signs in at the pool; the page's answer once signed in. */
  async function visit(tenantClaim: string | undefined, tenant: string) {
    const page = createApprovalPage({
      config: {
        auth: {
          mode: 'dev',
          devAuthDir: dir,
          issuer: ISSUER,
          audience: 'unused',
          tenantClaim: 'client_id',
          requiredScopes: ['idempotent-mcp/tools'],
        },
        approvals: {
          baseUrl: 'https://page.example.com',
          signIn: {
            clientId: 'page-client',
            authorizeUrl: 'https://pool.example.com/oauth2/authorize',
            tokenUrl,
            scopes: ['openid'],
            tenantClaim,
          },
        },
      },
      approvals: { current: async () => undefined } as never, // no record: a person of the tenant hears "no longer valid"
      signingSecret: async () => 's'.repeat(32),
      clock: () => Date.now(),
      logger: { info: () => {}, warn: () => {} },
    });
    const id = approvalId({ tenant, tool: 'request_payment', idempotencyKey: 'op-1' }, 'n'.repeat(22));
    const start = await page.request(`/${id}`);
    const signInCookie = start.headers.getSetCookie()[0]!.split(';')[0]!;
    const state = new URL(start.headers.get('location')!).searchParams.get('state')!;
    const back = await page.request(`/callback?code=c0de&state=${state}`, { headers: { cookie: signInCookie } });
    if (back.status !== 303) return back.status;
    const session = back.headers
      .getSetCookie()
      .find((cookie) => cookie.includes('approval_session='))!
      .split(';')[0]!;
    return (await page.request(`/${id}`, { headers: { cookie: session } })).status;
  }

  it('lets a person of the tenant in, keeps one of another tenant out, and needs the claim named', async () => {
    personTenant = 'tenant-a';
    expect(await visit('custom:tenant', 'tenant-a')).toBe(404);
    expect(await visit('custom:tenant', 'tenant-b')).toBe(403);
    // Read with the agents' claim, the person's token names no tenant: refused at sign-in.
    expect(await visit(undefined, 'tenant-a')).toBe(401);
  });
});
