import type { Context as LambdaContext } from 'aws-lambda';
import type { Context, Hono as AnyHono, MiddlewareHandler } from 'hono';
// PatternRouter: a handful of fixed routes need neither RegExpRouter nor TrieRouter, ~8 KiB of every cold start.
import { Hono } from 'hono/tiny';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { HTTPException } from 'hono/http-exception';
import { hostHeaderValidationResponse, localhostAllowedHostnames } from '@modelcontextprotocol/server';
import { AuthenticationError, AuthUnavailableError, type Caller, missingScopes } from '../auth/verifier';
import { createMcpRequestHandler, MAX_BODY_BYTES } from '../mcp/streamable-http';
import type { ToolDefinition } from '../mcp/tool-types';
import { MCP_PARAM_HEADER_PREFIX } from '../mcp/param-headers';
import { servedTools } from '../mcp/served-tools';
import { paramHeaderScan } from '../mcp/server';
import type { AppConfig, ApprovalPageConfig } from '../config';
import { APPROVALS_PATH, MCP_PATH } from '../core/endpoint-paths';
import { createApprovalPage } from './approval-page';
import type { TokenVerifier } from '../auth/verifier';
import type { ToolRuntime } from '../mcp/tool-types';
import { batchRefusal } from './json-rpc-batch';

const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';

/** `c.env` under the Lambda adapter (hono/aws-lambda); under @hono/node-server it holds no lambdaContext. */
/**
 * The app's Hono environment: `c.env.lambdaContext` under the Lambda adapter, the verified caller as `c.var.caller`.
 */
export type AppEnv = { Bindings: { lambdaContext?: LambdaContext }; Variables: { caller: Caller } };

/**
 * What the HTTP app uses: the tool runtime its tools run on, the bearer verifier and the settings of origins, base
 * URL and auth. `S`: the services the tools need (the endpoint's own services object satisfies it).
 */
export type AppServices<S extends ToolRuntime = ToolRuntime> = S & {
  config: Pick<AppConfig, 'allowedOrigins' | 'publicBaseUrl' | 'auth'> & { approvals?: ApprovalPageConfig };
  auth: TokenVerifier;
  /** The key of the approval page's cookies; with `approvals` and `config.approvals.signIn`, the page is served. */
  signingSecret?: () => Promise<string>;
};

/**
 * What `createApp` serves besides the services: the tools, extra routes, the store's health probe, the host names it answers.
 */
export interface AppOptions<S extends ToolRuntime = ToolRuntime> {
  /** The tools the endpoint serves, and only these: there is no default list. */
  tools: readonly ToolDefinition<S>[];
  /**
   * Route groups served next to /mcp, by path. `npm start` mounts the sandbox downstreams and the dev issuer's
   * sign-in (`createDevSignIn`) here; the MCP function mounts none (deployed, the sandbox is a function of its own,
   * and the dev issuer is refused), so its bundle carries neither.
   */
  mounts?: Record<string, AnyHono>;
  /** Whether the store answers now: then `/health` is 503 while it does not. The local stack asks its emulator. */
  storeReachable?: () => Promise<boolean>;
  /**
   * The host names this server answers (`servedHostnames`): a request naming any other Host is refused (403) before
   * routing. DNS rebinding: a page whose name was rebound to this server's address sends its own name as Host, and
   * would otherwise reach every route, the unauthenticated local ones too. Unset: any Host (on Lambda, API Gateway
   * and the Function URL answer only their own names). The local server sets it.
   */
  hosts?: readonly string[];
}

/**
 * The host names a server on this machine serves: the loopback names, and those of the configured base URLs.
 */
export function servedHostnames(config: Pick<AppConfig, 'publicBaseUrl'> & { approvals?: Pick<ApprovalPageConfig, 'baseUrl'> }): string[] {
  const configured = [config.publicBaseUrl, config.approvals?.baseUrl]
    .filter((url): url is string => url !== undefined)
    .map((url) => new URL(url).hostname);
  return [...new Set([...localhostAllowedHostnames(), ...configured])];
}

const jsonRpcError = (code: number, message: string) => ({ jsonrpc: '2.0' as const, error: { code, message }, id: null });

function isLoopbackOrigin(origin: string): boolean {
  try {
    const { hostname, protocol } = new URL(origin);
    return (protocol === 'http:' || protocol === 'https:') && ['localhost', '127.0.0.1', '[::1]'].includes(hostname);
  } catch {
    return false;
  }
}

/**
 * DNS-rebinding protection: a browser always sends Origin on a cross-site or non-GET request, so a page that
 * rebinds its host name to this server is refused. Requests without Origin (agents, curl) are not browsers.
 */
function originGuard(allowedOrigins: readonly string[], publicBaseUrl: string | undefined): MiddlewareHandler<AppEnv> {
  const allowed = new Set(allowedOrigins);
  if (publicBaseUrl) allowed.add(new URL(publicBaseUrl).origin);
  return async (c, next) => {
    const origin = c.req.header('origin');
    // Our own pages (the approval page's form) post from this origin.
    const own = origin !== undefined && origin === new URL(c.req.url).origin;
    if (origin !== undefined && !own && !allowed.has(origin) && !isLoopbackOrigin(origin))
      return c.json(jsonRpcError(-32000, 'Forbidden: this Origin is not allowed'), 403);
    await next();
  };
}

function baseUrl(c: Context<AppEnv>, services: AppServices): string {
  return services.config.publicBaseUrl ?? new URL(c.req.url).origin;
}

/** RFC 6750 challenge parameters, quoted (a quote inside a value becomes an apostrophe). */
function challenge(params: Record<string, string | undefined>): string {
  const parts = Object.entries(params)
    .filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '')
    .map(([name, value]) => `${name}="${value.replace(/"/g, "'")}"`);
  return `Bearer ${parts.join(', ')}`;
}

/**
 * Bearer token to caller; 401 with the RFC 9728 pointer to our metadata and the scope to ask for, so a client can
 * discover how to log in; 403 `insufficient_scope` for a valid token without the required scope. Nothing runs.
 */
function authenticate(services: AppServices): MiddlewareHandler<AppEnv> {
  const { requiredScopes } = services.config.auth;
  const scope = requiredScopes.length > 0 ? requiredScopes.join(' ') : undefined;
  return async (c, next) => {
    const metadata = `${baseUrl(c, services)}${PROTECTED_RESOURCE_METADATA_PATH}`;
    let caller: Caller;
    try {
      caller = await services.auth.verify(c.req.header('authorization'));
    } catch (err) {
      if (err instanceof AuthUnavailableError) {
        services.logger.warn('token issuer unreachable', { error_name: (err.cause as Error | undefined)?.name });
        c.header('Retry-After', '5');
        return c.json(jsonRpcError(-32000, 'Authentication is temporarily unavailable; retry shortly.'), 503);
      }
      if (!(err instanceof AuthenticationError)) throw err;
      c.header(
        'WWW-Authenticate',
        challenge({
          resource_metadata: metadata,
          scope,
          error: err.bearerError,
          error_description: err.bearerError ? err.message : undefined,
        }),
      );
      return c.json(jsonRpcError(-32001, `Unauthorized: ${err.message}`), 401);
    }
    const missing = missingScopes(caller, requiredScopes);
    if (missing.length > 0) {
      const message = `the token lacks the scope this endpoint requires: ${missing.join(' ')}`;
      c.header(
        'WWW-Authenticate',
        challenge({ error: 'insufficient_scope', scope, resource_metadata: metadata, error_description: message }),
      );
      return c.json(jsonRpcError(-32001, `Forbidden: ${message}`), 403);
    }
    c.set('caller', caller);
    await next();
  };
}

/**
 * The request headers a browser client of these tools may send: the transport's own (2026-07-28 requests carry
 * Mcp-Method and Mcp-Name) and one `Mcp-Param-<Name>` per argument a served tool marks with `x-mcp-header` (the
 * write tools' keys, and a team's own marked arguments), read from the inputSchemas tools/list serves, so a header
 * the server checks is one the preflight allows.
 */
function corsAllowedHeaders<S extends ToolRuntime>(tools: readonly ToolDefinition<S>[]): string[] {
  const params = new Map<string, string>();
  for (const tool of servedTools(tools))
    for (const { headerName } of paramHeaderScan(tool).declarations ?? [])
      params.set(headerName.toLowerCase(), `${MCP_PARAM_HEADER_PREFIX}${headerName}`);
  return [
    'Authorization',
    'Content-Type',
    'Accept',
    'Mcp-Protocol-Version',
    'Mcp-Session-Id',
    'Mcp-Method',
    'Mcp-Name',
    'Last-Event-ID',
    ...params.values(),
  ];
}

/**
 * Hono's `cors` for a request that is not a preflight, with the same headers, set on the answer once it is made.
 * Hono's own sets them on `c.res` before the handler runs, and an answer a handler returns (the MCP SDK's) is then
 * rebuilt around them as a web Response with a stream for its body: under @hono/node-server its string no longer goes
 * to the socket at once, the answer of every call is copied through a stream.
 */
function corsAfterAnswer(options: { origin: (origin: string) => string; exposeHeaders: readonly string[] }): MiddlewareHandler<AppEnv> {
  const expose = options.exposeHeaders.join(',');
  return async (c, next) => {
    const allowOrigin = options.origin(c.req.header('origin') || '');
    await next();
    const add = (headers: Headers) => {
      if (allowOrigin) headers.set('Access-Control-Allow-Origin', allowOrigin);
      headers.set('Access-Control-Expose-Headers', expose);
      headers.append('Vary', 'Origin');
    };
    try {
      add(c.res.headers);
    } catch (err) {
      // An answer whose headers are immutable (a fetched Response a mount passes on): a copy takes them, as Hono's does.
      if (!(err instanceof TypeError)) throw err;
      c.res = new Response(c.res.body, c.res);
      add(c.res.headers);
    }
  };
}

/**
 * Hono's `bodyLimit`, deciding from Content-Length when the request states its size (no Transfer-Encoding) without
 * asking for the body first: under @hono/node-server asking builds the web Request and its stream, and the body is
 * then read through that stream instead of straight from the socket. Requests of a method without a body pass, as
 * there; any other request goes to `bodyLimit`, which counts what it reads.
 */
function limitBody(maxSize: number, onError: (c: Context<AppEnv>) => Response | Promise<Response>): MiddlewareHandler<AppEnv> {
  const limit = bodyLimit({ maxSize, onError });
  return async (c, next) => {
    const method = c.req.method;
    if (method === 'GET' || method === 'HEAD' || method === 'TRACE') return next();
    const length = c.req.header('content-length');
    if (length !== undefined && c.req.header('transfer-encoding') === undefined)
      return parseInt(length || '0', 10) > maxSize ? onError(c) : next();
    return limit(c, next);
  };
}

/**
 * The one HTTP app: the Lambda handler (through hono/aws-lambda) and the local server (through @hono/node-server)
 * serve exactly this.
 */
export function createApp<S extends ToolRuntime>(services: AppServices<S>, options: AppOptions<S>): Hono<AppEnv> {
  const { config, logger } = services;
  const app = new Hono<AppEnv>();
  const mcp = createMcpRequestHandler<S>(services, { tools: options.tools });

  const { hosts } = options;
  if (hosts)
    app.use('*', async (c, next) => {
      const refused = hostHeaderValidationResponse(c.req.raw, [...hosts]);
      if (refused) {
        logger.warn('request refused: a Host this server does not serve', { path: c.req.path });
        return refused;
      }
      await next();
    });
  app.use('*', originGuard(config.allowedOrigins, config.publicBaseUrl));
  // Browser-based clients (MCP Inspector's direct mode) need CORS; the origin guard has already vetted the Origin.
  const corsOptions = {
    origin: (origin: string) => origin,
    allowMethods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
    // Not CORS-safelisted: a browser client must read them to log in (401) and to back off (503).
    exposeHeaders: ['Mcp-Session-Id', 'WWW-Authenticate', 'Retry-After'],
    maxAge: 600,
  };
  const simpleCors = corsAfterAnswer(corsOptions);
  // The preflight's allowed headers come from the served tools' listed inputSchemas, made on the first preflight:
  // a cold start or a non-browser client pays nothing for them.
  let preflightCors: MiddlewareHandler | undefined;
  app.use('*', (c, next) =>
    c.req.method === 'OPTIONS'
      ? (preflightCors ??= cors({ ...corsOptions, allowHeaders: corsAllowedHeaders(options.tools) }))(c, next)
      : simpleCors(c, next),
  );
  app.use(
    '*',
    limitBody(MAX_BODY_BYTES, (c) => {
      // The unread rest of the body is still on the wire: the connection cannot carry another request.
      c.header('Connection', 'close');
      return c.json(jsonRpcError(-32000, `Request body too large (limit ${MAX_BODY_BYTES} bytes)`), 413);
    }),
  );

  // A browser asks every origin for an icon: no content, rather than a 404 in the person's console.
  app.get('/favicon.ico', (c) => c.body(null, 204));

  app.get('/health', async (c) => {
    if (options.storeReachable && !(await options.storeReachable())) {
      c.header('Retry-After', '1');
      return c.json({ status: 'unavailable', store: 'unreachable' }, 503);
    }
    return c.json({ status: 'ok' });
  });

  // RFC 9728 protected-resource metadata, at the root and at the path-suffixed location for the /mcp resource.
  const protectedResource = (c: Context<AppEnv>) => {
    const base = baseUrl(c, services);
    if (config.publicBaseUrl) {
      c.header('Cache-Control', 'public, max-age=300');
    } else {
      // Derived from the request's Host: a shared cache must never hand one Host's answer to another.
      c.header('Cache-Control', 'private, no-store');
      c.header('Vary', 'Host', { append: true });
    }
    return c.json({
      resource: `${base}${MCP_PATH}`,
      // Locally the dev issuer (tokens come from `npm run token`, not from an OAuth flow).
      authorization_servers: [config.auth.issuer],
      ...(config.auth.requiredScopes.length > 0 ? { scopes_supported: config.auth.requiredScopes } : {}),
      bearer_methods_supported: ['header'],
      resource_name: 'Idempotent MCP endpoint',
    });
  };
  app.get(PROTECTED_RESOURCE_METADATA_PATH, protectedResource);
  app.get(`${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`, protectedResource);

  app.post(MCP_PATH, authenticate(services), async (c) => {
    // Parsed here (the SDK takes it as is) so that a batch it would mishandle is refused before anything runs.
    let body: unknown;
    try {
      body = await c.req.json();
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err; // e.g. the body limit, answered by its middleware
      logger.info('mcp request refused', { reason: 'Parse error: Invalid JSON' });
      return c.json(jsonRpcError(-32700, 'Parse error: Invalid JSON'), 400);
    }
    const refusal = batchRefusal(body);
    if (refusal) {
      logger.info('mcp request refused', { reason: refusal.slice(0, 200) });
      return c.json(jsonRpcError(-32600, refusal), 400);
    }
    const lambda = c.env?.lambdaContext;
    return mcp(c.req.raw, {
      parsedBody: body,
      caller: c.get('caller'),
      origin: baseUrl(c, services),
      remainingTimeMs: lambda ? () => lambda.getRemainingTimeInMillis() : undefined,
    });
  });
  // Stateless: no server-initiated SSE stream to GET, no session to DELETE.
  app.on(['GET', 'DELETE'], MCP_PATH, (c) => {
    c.header('Allow', 'POST');
    return c.json(jsonRpcError(-32000, 'Method not allowed: this stateless endpoint takes POST only'), 405);
  });

  // The approval page (URL-mode confirmations). Locally, the dev issuer's sign-in it sends the person to is one of
  // the mounts (`createDevSignIn`): the functions never trust the dev issuer, so their bundles do not carry it.
  const { approvals, signingSecret } = services;
  const mounted = new Hono();
  for (const [path, routes] of Object.entries(options.mounts ?? {})) mounted.route(path, routes);
  if (approvals && signingSecret && config.approvals?.signIn)
    app.route(
      APPROVALS_PATH,
      createApprovalPage({
        config: { ...config, approvals: config.approvals },
        approvals,
        signingSecret,
        clock: services.clock,
        logger,
        // Locally the dev issuer's token URL is relative, one of the mounts: exchanged in-process, never sent to a
        // host a request names.
        localRoutes: config.auth.mode === 'dev' ? mounted.fetch : undefined,
      }),
    );

  app.route('/', mounted);

  app.notFound((c) => c.json({ error: 'not found' }, 404));
  // Nothing internal leaves the server: the client gets a generic error, the log gets the error's name.
  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse();
    logger.error('unhandled error', { error_name: err.name, path: c.req.path });
    return c.json(jsonRpcError(-32603, 'Internal error'), 500);
  });
  return app;
}
