import {
  type AuthInfo,
  CLIENT_CAPABILITIES_META_KEY,
  type McpServer,
  type RegisteredTool,
  type Server,
  type ServerContext,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/server';
import { validateTenantId } from '../core/idempotency-key';
import { canElicitForms, canElicitUrls } from './confirmation';
import { isUrlElicitationRequired, type ToolAnswer, type ToolCall, type ToolRuntime, type WriteToolDefinition } from './tool-types';

type RequestFacts = Pick<ToolCall, 'era' | 'inputResponses' | 'requestState' | 'canElicitForms' | 'canElicitUrls' | 'protocolVersion'>;

/** A tool's answer on the wire: a 2025-11-25 client is told to open the approval page by that era's error (-32042). */
export function answerOf(answer: ToolAnswer): Exclude<ToolAnswer, { resultType: 'url_elicitation_required' }> {
  if (isUrlElicitationRequired(answer)) throw new UrlElicitationRequiredError(answer.elicitations, answer.message);
  return answer;
}

/** What a tool call needs to know of its MCP request: its protocol era and, on 2026-07-28, the input round it carries. */
export function requestFacts(server: Server, ctx: ServerContext): RequestFacts {
  const state = ctx.mcpReq.requestState();
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  // A stateless 2025-era request has no handshake on its server: its version is the header every such request carries.
  const protocolVersion = server.getNegotiatedProtocolVersion() ?? ctx.http?.req?.headers.get('mcp-protocol-version') ?? undefined;
  return {
    era: protocolVersion === '2026-07-28' ? 'modern' : 'legacy',
    protocolVersion,
    inputResponses: ctx.mcpReq.inputResponses,
    requestState: typeof state === 'string' ? state : undefined,
    canElicitForms: canElicitForms(envelope?.[CLIENT_CAPABILITIES_META_KEY]),
    canElicitUrls: canElicitUrls(envelope?.[CLIENT_CAPABILITIES_META_KEY]),
  };
}

export interface RegisterWriteToolOptions<S extends ToolRuntime> {
  /** The services the tool needs (the engine and its store among them). */
  services: S;
  /**
   * The tenant of a request, from the token your server verified (`ctx.http.authInfo`, as your bearer middleware
   * filled it): every key is scoped to it. Throw to refuse the call.
   */
  tenant: (authInfo: AuthInfo | undefined) => string;
  /** The time the request may still take (a Lambda's remaining time), so an execution never outlives it. */
  remainingTimeMs?: () => number;
}

/**
 * Puts an idempotent write tool (from `defineWriteTool`) on your own `McpServer`: a retry with the same key replays
 * the first result instead of running again, and confirmation-required tools ask the person on 2026-07-28.
 * Arguments are validated by your server as for any registered tool (an invalid call gets its validation error).
 */
export function registerWriteTool<S extends ToolRuntime>(
  server: McpServer,
  tool: WriteToolDefinition<S>,
  options: RegisterWriteToolOptions<S>,
): RegisteredTool {
  const tools = new Map([[tool.name, tool]]);
  return server.registerTool(
    tool.name,
    { title: tool.title, description: tool.description, inputSchema: tool.inputSchema, outputSchema: tool.outputSchema, annotations: tool.annotations },
    async (args, ctx) => {
      const authInfo = ctx.http?.authInfo;
      const tenant = validateTenantId(options.tenant(authInfo));
      return answerOf(await tool.call(args as Record<string, unknown>, {
        services: options.services,
        caller: { tenant, subject: authInfo?.clientId ?? 'unknown', scopes: authInfo?.scopes ?? [] },
        remainingTimeMs: options.remainingTimeMs,
        tools,
        ...requestFacts(server.server, ctx),
      }));
    },
  );
}
