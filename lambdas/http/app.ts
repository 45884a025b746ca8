import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Context as LambdaContext } from 'aws-lambda';
import type { Context, Hono as AnyHono, MiddlewareHandler } from 'hono';
// PatternRouter: a handful of fixed routes need neither RegExpRouter nor TrieRouter, ~8 KiB of every cold start.
import { Hono } from 'hono/tiny';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { HTTPException } from 'hono/http-exception';
import { AuthenticationError, AuthUnavailableError, type Caller } from '../auth/verifier';
import { buildMcpServer } from '../mcp/server';
import type { ToolDefinition } from '../mcp/tool-types';
import type { Services } from '../runtime/services';
import { batchRefusal } from './json-rpc-batch';

/** Larger request bodies are refused with 413 before anything parses them. */
export const MAX_BODY_BYTES = 1024 * 1024;
export const MCP_PATH = '/mcp';
export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';

/** `c.env` under the Lambda adapter (hono/aws-lambda); under @hono/node-server it holds no lambdaContext. */
type Bindings = { lambdaContext?: LambdaContext };
type AppEnv = { Bindings: Bindings; Variables: { caller: Caller } };

export interface AppOptions {
  /** Defaults to the registry in lambdas/mcp/tools; tests add tools of their own. */
  tools?: readonly ToolDefinition[];
  /**
   * Route groups served next to /mcp, by path. `npm start` mounts the sandbox downstreams here; the MCP function
   * mounts none (deployed, the sandbox is a function of its own), so its bundle does not carry them.
   */
  mounts?: Record<string, AnyHono>;
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
function originGuard(allowedOrigins: readonly string[]): MiddlewareHandler<AppEnv> {
  const allowed = new Set(allowedOrigins);
  return async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined && !allowed.has(origin) && !isLoopbackOrigin(origin))
      return c.json(jsonRpcError(-32000, 'Forbidden: this Origin is not allowed'), 403);
    await next();
  };
}

function baseUrl(c: Context<AppEnv>, services: Services): string {
  return services.config.publicBaseUrl ?? new URL(c.req.url).origin;
}

/** Bearer token to caller; 401 with the RFC 9728 pointer to our metadata so a client can discover how to log in. */
function authenticate(services: Services): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    try {
      c.set('caller', await services.auth.verify(c.req.header('authorization')));
    } catch (err) {
      if (err instanceof AuthUnavailableError) {
        services.logger.warn('token issuer unreachable', { error_name: (err.cause as Error | undefined)?.name });
        c.header('Retry-After', '5');
        return c.json(jsonRpcError(-32000, 'Authentication is temporarily unavailable; retry shortly.'), 503);
      }
      if (!(err instanceof AuthenticationError)) throw err;
      const metadata = `${baseUrl(c, services)}${PROTECTED_RESOURCE_METADATA_PATH}`;
      const problem = err.bearerError
        ? `, error="${err.bearerError}", error_description="${err.message.replace(/"/g, "'")}"`
        : '';
      c.header('WWW-Authenticate', `Bearer resource_metadata="${metadata}"${problem}`);
      return c.json(jsonRpcError(-32001, `Unauthorized: ${err.message}`), 401);
    }
    await next();
  };
}

/**
 * The one HTTP app: the Lambda handler (through hono/aws-lambda) and the local server (through @hono/node-server)
 * serve exactly this.
 */
export function createApp(services: Services, options: AppOptions = {}): Hono<AppEnv> {
  const { config, logger } = services;
  const app = new Hono<AppEnv>();

  app.use('*', originGuard(config.allowedOrigins));
  // Browser-based clients (MCP Inspector's direct mode) need CORS; the origin guard has already vetted the Origin.
  app.use(
    '*',
    cors({
      origin: (origin) => origin,
      allowMethods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
      allowHeaders: ['Authorization', 'Content-Type', 'Accept', 'Mcp-Protocol-Version', 'Mcp-Session-Id', 'Last-Event-ID'],
      // Not CORS-safelisted: a browser client must read them to log in (401) and to back off (503).
      exposeHeaders: ['Mcp-Session-Id', 'WWW-Authenticate', 'Retry-After'],
      maxAge: 600,
    }),
  );
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => {
        // The unread rest of the body is still on the wire: the connection cannot carry another request.
        c.header('Connection', 'close');
        return c.json(jsonRpcError(-32000, `Request body too large (limit ${MAX_BODY_BYTES} bytes)`), 413);
      },
    }),
  );

  app.get('/health', (c) => c.json({ status: 'ok' }));

  // RFC 9728 protected-resource metadata, at the root and at the path-suffixed location for the /mcp resource.
  const protectedResource = (c: Context<AppEnv>) => {
    const base = baseUrl(c, services);
    c.header('Cache-Control', 'public, max-age=300');
    return c.json({
      resource: `${base}${MCP_PATH}`,
      ...(config.auth.mode === 'oidc' ? { authorization_servers: [config.auth.issuer] } : {}),
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
    const server = buildMcpServer(services, c.get('caller'), {
      tools: options.tools,
      remainingTimeMs: lambda ? () => lambda.getRemainingTimeInMillis() : undefined,
    });
    // Stateless (no session id: any Lambda instance may get the next request) with plain JSON responses,
    // one transport per request: SDK 1.32 refuses to reuse a stateless transport.
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: MAX_BODY_BYTES,
    });
    // Mostly a client's mistake (malformed JSON, wrong Accept): worth a line, not an alarm.
    server.onerror = (err) => logger.info('mcp request refused', { reason: err.message.slice(0, 200) });
    await server.connect(transport);
    try {
      return await transport.handleRequest(c.req.raw, { parsedBody: body });
    } finally {
      // JSON mode: the response is complete once handleRequest resolves, so the server can go.
      await server.close();
    }
  });
  // Stateless: no server-initiated SSE stream to GET, no session to DELETE.
  app.on(['GET', 'DELETE'], MCP_PATH, (c) => {
    c.header('Allow', 'POST');
    return c.json(jsonRpcError(-32000, 'Method not allowed: this stateless endpoint takes POST only'), 405);
  });

  for (const [path, routes] of Object.entries(options.mounts ?? {})) app.route(path, routes);

  app.notFound((c) => c.json({ error: 'not found' }, 404));
  // Nothing internal leaves the server: the client gets a generic error, the log gets the error's name.
  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse();
    logger.error('unhandled error', { error_name: err.name, path: c.req.path });
    return c.json(jsonRpcError(-32603, 'Internal error'), 500);
  });
  return app;
}
