import {
  type AuthInfo,
  createMcpHandler,
  isJSONRPCRequest,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import type { Caller } from '../auth/verifier';
import { hashForLog } from '../core/idempotency-key';
import { checkParamHeaders, describeParamHeaderMismatch, HEADER_MISMATCH, type ParamHeaderDeclaration } from './param-headers';
import { servedTools } from './served-tools';
import { buildMcpServer, paramHeaderScan } from './server';
import type { ToolDefinition, ToolRuntime } from './tool-types';

/**
 * Larger request bodies are refused with 413 before anything parses them.
 */
export const MAX_BODY_BYTES = 1024 * 1024;

interface McpRequestOptions {
  /** The authenticated caller: the only source of the tenant. */
  caller: Caller;
  /** The JSON body when the caller has read it already (the request's own body is then used up). */
  parsedBody?: unknown;
  /** The Lambda's remaining time for this invocation, so an execution never outlives it. */
  remainingTimeMs?: () => number;
  /** The origin the request came to (the approval page's links when no public base URL is set). */
  origin?: string;
}

/** Serves one authenticated MCP POST and resolves with its answer. */
export type McpRequestHandler = (request: Request, options: McpRequestOptions) => Promise<Response>;

/** The per-request facts the SDK's handler carries to the server factory (it passes authInfo through untouched). */
interface RequestFacts extends McpRequestOptions {
  [key: string]: unknown;
}

const authInfoOf = ({ caller, remainingTimeMs, origin }: McpRequestOptions): AuthInfo => ({
  token: '',
  clientId: caller.subject,
  scopes: [...(caller.scopes ?? [])],
  extra: { caller, remainingTimeMs, origin } satisfies RequestFacts,
});

/**
 * The 2026-07-28 rule on tool-parameter headers (param-headers.ts), applied before anything runs: a `tools/call`
 * whose `Mcp-Param-*` headers disagree with the arguments the tool's inputSchema marks with `x-mcp-header` (the key
 * of every write tool among them), or lack one while the argument is there, is answered 400 / -32020 HeaderMismatch
 * as the SDK's McpServer answers it; the low-level server here gets no such check from the SDK. Undefined: the call
 * goes on. The log line carries the values hashed, as the key is everywhere else.
 */
function paramHeaderRefusal<S extends ToolRuntime>(
  request: Request,
  body: unknown,
  tools: ReadonlyMap<string, ToolDefinition<S>>,
  declarationsOf: (tool: ToolDefinition<S>) => readonly ParamHeaderDeclaration[],
  facts: McpRequestOptions,
  logger: ToolRuntime['logger'],
): Response | undefined {
  if (!isJSONRPCRequest(body) || body.method !== 'tools/call') return undefined;
  const params = body.params as { name?: unknown; arguments?: unknown } | undefined;
  const tool = typeof params?.name === 'string' ? tools.get(params.name) : undefined;
  if (!tool) return undefined;
  const declarations = declarationsOf(tool);
  const mismatch = declarations.length > 0 ? checkParamHeaders(declarations, params?.arguments, request.headers) : undefined;
  if (!mismatch) return undefined;
  const reason = describeParamHeaderMismatch(mismatch);
  logger.info('mcp request refused', {
    reason: 'header mismatch',
    tool: tool.name,
    tenant: facts.caller.tenant,
    header: mismatch.header,
    problem: mismatch.problem,
    value_hash: hashForLog(mismatch.bodyValue),
    header_value_hash: mismatch.headerValue === undefined ? undefined : hashForLog(mismatch.headerValue),
  });
  return Response.json(
    {
      jsonrpc: '2.0',
      id: body.id,
      error: {
        code: HEADER_MISMATCH,
        message: `Bad Request: the request headers and body disagree: ${reason}`,
        data: { mismatch: { header: mismatch.header, body: reason } },
      },
    },
    { status: 400 },
  );
}

/**
 * One stateless Request → Response handler for both protocol eras, with a new server and a new transport for every
 * request (CVE-2026-25536):
 * - 2026-07-28 requests (no handshake; version, capabilities and `Mcp-Method` on each request; `server/discover`)
 *   go to the SDK's per-request handler, answering in plain JSON: its default `auto` mode streams only when a
 *   handler emits a message before its result, which no tool here does. (`json` mode would force the same answers
 *   but prints a warning about dropped notifications at every start, which nobody running this can act on.)
 * - 2025-era requests (`initialize`, then calls without `_meta`) go to the stateless Streamable HTTP transport in
 *   JSON mode, so those clients get exactly the answers they got before (the SDK's own legacy leg answers in SSE).
 * Origin checks and bearer authentication come first (lambdas/http/app.ts): `caller` is already verified.
 * 2026-07-28 calls are checked against their `Mcp-Param-*` headers first (paramHeaderRefusal). 2025-era requests
 * are not: those revisions define no such headers, their clients send none, and the spec tells an intermediary not
 * to trust mirrored headers on them.
 */
export function createMcpRequestHandler<S extends ToolRuntime>(
  services: S,
  options: { tools: readonly ToolDefinition<S>[] },
): McpRequestHandler {
  const onerror = (err: Error) => services.logger.info('mcp request refused', { reason: err.message.slice(0, 200) });
  // Once, here: a tool list the server cannot serve (two tools of one name) fails the start, not every request.
  const tools = servedTools(options.tools);
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  // Read at the first 2026-07-28 call of each tool, not at start: a cold start pays for no tool it is not asked for.
  const warned = new WeakSet<ToolDefinition<S>>();
  const declarationsOf = (tool: ToolDefinition<S>) => {
    const scan = paramHeaderScan(tool);
    if (!scan.valid && !warned.has(tool)) {
      warned.add(tool);
      // As the SDK's McpServer does; the declarations that are well-formed are still checked.
      services.logger.warn('tool declares an invalid x-mcp-header: conforming 2026-07-28 clients leave it out of tools/list', {
        tool: tool.name,
        reason: scan.reason,
      });
    }
    return scan.declarations ?? [];
  };
  const serverFor = (facts: McpRequestOptions) =>
    buildMcpServer(services, facts.caller, { tools, remainingTimeMs: facts.remainingTimeMs, origin: facts.origin });
  const modern = createMcpHandler(
    ({ authInfo }) => {
      const facts = authInfo?.extra as RequestFacts | undefined;
      if (!facts?.caller) throw new Error('an MCP request reached the server without its authenticated caller');
      return serverFor(facts);
    },
    { legacy: 'reject', maxRequestBodySize: MAX_BODY_BYTES, onerror, keepAliveMs: 0 },
  );

  return async (request, facts) => {
    const { parsedBody } = facts;
    if (!(await isLegacyRequest(request, parsedBody, { maxRequestBodySize: MAX_BODY_BYTES }))) {
      const body =
        parsedBody ??
        (await request
          .clone()
          .json()
          .catch(() => undefined));
      const refusal = paramHeaderRefusal(request, body, byName, declarationsOf, facts, services.logger);
      if (refusal) return refusal;
      return modern.fetch(request, { authInfo: authInfoOf(facts), parsedBody: body });
    }
    const server = serverFor(facts);
    // Stateless (no session id: any Lambda instance may get the next request) with plain JSON responses.
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: MAX_BODY_BYTES,
    });
    server.onerror = onerror;
    await server.connect(transport);
    try {
      return await transport.handleRequest(request, { authInfo: authInfoOf(facts), parsedBody });
    } finally {
      // JSON mode: the response is complete once handleRequest resolves, so the server can go.
      await server.close();
    }
  };
}
