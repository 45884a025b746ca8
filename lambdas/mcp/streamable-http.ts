import {
  type AuthInfo,
  createMcpHandler,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import type { Caller } from '../auth/verifier';
import { servedTools } from './served-tools';
import { buildMcpServer } from './server';
import type { ToolDefinition, ToolRuntime } from './tool-types';

/** Larger request bodies are refused with 413 before anything parses them. */
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
 * One stateless Request → Response handler for both protocol eras, with a new server and a new transport for every
 * request (CVE-2026-25536):
 * - 2026-07-28 requests (no handshake; version, capabilities and `Mcp-Method` on each request; `server/discover`)
 *   go to the SDK's per-request handler, answering in plain JSON: its default `auto` mode streams only when a
 *   handler emits a message before its result, which no tool here does. (`json` mode would force the same answers
 *   but prints a warning about dropped notifications at every start, which nobody running this can act on.)
 * - 2025-era requests (`initialize`, then calls without `_meta`) go to the stateless Streamable HTTP transport in
 *   JSON mode, so those clients get exactly the answers they got before (the SDK's own legacy leg answers in SSE).
 * Origin checks and bearer authentication come first (lambdas/http/app.ts): `caller` is already verified.
 */
export function createMcpRequestHandler<S extends ToolRuntime>(services: S, options: { tools: readonly ToolDefinition<S>[] }): McpRequestHandler {
  const onerror = (err: Error) => services.logger.info('mcp request refused', { reason: err.message.slice(0, 200) });
  // Once, here: a tool list the server cannot serve (two tools of one name) fails the start, not every request.
  const tools = servedTools(options.tools);
  const serverFor = (facts: McpRequestOptions) => buildMcpServer(services, facts.caller, { tools, remainingTimeMs: facts.remainingTimeMs, origin: facts.origin });
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
    if (!(await isLegacyRequest(request, parsedBody, { maxRequestBodySize: MAX_BODY_BYTES })))
      return modern.fetch(request, { authInfo: authInfoOf(facts), parsedBody });
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
