import {
  type AuthInfo,
  CLIENT_CAPABILITIES_META_KEY,
  type Server,
  type ServerContext,
  type ToolAnnotations,
} from '@modelcontextprotocol/server';
import * as z from 'zod';
import { ErrorCode } from '../core/errors';
import { validateTenantId } from '../core/idempotency-key';
import { hasReplayHint } from '../core/replay-hint';
import { readErrorText, WriteResults } from '../core/result-contract';
import { canElicitForms, canElicitUrls } from './confirmation';
import { callTool } from './define-read-tool';
import { toCallToolResult } from './define-write-tool';
import { isWriteTool, type ToolAnswer, type ToolCall, type ToolDefinition, type ToolRuntime, type WriteToolDefinition } from './tool-types';

type RequestFacts = Pick<
  ToolCall,
  'era' | 'inputResponses' | 'requestState' | 'canElicitForms' | 'canElicitUrls' | 'protocolVersion' | 'likelyReplay'
>;

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
    // Both eras: the SDK lifts only its reserved envelope keys out of `_meta`, ours stays.
    likelyReplay: hasReplayHint(ctx.mcpReq._meta),
  };
}

/**
 * The part of an SDK `McpServer` these helpers use, so that both lines fit: `@modelcontextprotocol/server` 2.x and
 * `@modelcontextprotocol/sdk` 1.23 or later (the first 1.x with zod 4 schemas).
 * @public
 */
export interface McpServerLike {
  /** The SDK's `McpServer.registerTool`: the helpers register each tool through it. */
  registerTool(
    name: string,
    config: { title?: string; description?: string; inputSchema?: never; outputSchema?: never; annotations?: ToolAnnotations },
    callback: (args: never, extra: never) => unknown,
  ): unknown;
  /**
   * The SDK's low-level `Server` under the `McpServer`: with the v2 SDK, the helpers read a call's protocol facts
   * (version, client capabilities) from it.
   */
  readonly server: object;
}

/**
 * What `registerWriteTool` and `registerReadTool` need besides the tool: the services, the tenant of the server's caller, the time left, the other tools.
 * @public
 */
export interface RegisterToolOptions<S extends ToolRuntime> {
  /** The services the tool needs (the engine and its store among them). */
  services: S;
  /**
   * The tenant of a request, from the token your server verified (the `authInfo` your bearer middleware passed
   * with the request), e.g. `(authInfo) => authInfo?.extra?.tenant`: every key is scoped to it. Anything but a valid
   * tenant id (undefined, '', not a string, a stringified nothing such as "undefined") refuses the call and nothing
   * runs; so does a throw.
   */
  tenant: (authInfo: AuthInfo | undefined) => unknown;
  /** The time the request may still take (a Lambda's remaining time), so an execution never outlives it. */
  remainingTimeMs?: () => number;
  /**
   * The other tools on this server that a tool looks up: the write tools `getOperationStatusTool` and
   * `issueOperationIdTool` answer for. Default: none besides the tool itself.
   */
  tools?: readonly ToolDefinition<S>[];
}

const NOT_AUTHENTICATED = 'This call carries no verified tenant (it is not authenticated); nothing ran. Call again with a valid token.';

/** The verified tenant, or undefined: the tenant function's answer, checked, never a guess. */
function verifiedTenant(tenantOf: RegisterToolOptions<ToolRuntime>['tenant'], authInfo: AuthInfo | undefined): string | undefined {
  let tenant: unknown;
  try {
    tenant = tenantOf(authInfo);
  } catch {
    return undefined;
  }
  if (typeof tenant !== 'string') return undefined;
  // validateTenantId refuses what `String(x)` makes of a missing value ("undefined", "null", "NaN") with the other reserved words.
  try {
    return validateTenantId(tenant);
  } catch {
    return undefined;
  }
}

/**
 * The SDK's `registerTool` validates arguments itself and answers a failure with its own text ("Input validation
 * error"), where the contract answers `rejected` + INVALID_ARGUMENTS in structured content. So the SDK gets a
 * schema that accepts any object, carrying the tool's own JSON Schema for `tools/list` (zod puts metadata into the
 * JSON Schema it writes, in both SDK lines), and the tool validates its arguments itself.
 */
const listedSchemas = new WeakMap<ToolDefinition, z.ZodType>();
function listedInputSchema(tool: ToolDefinition): z.ZodType {
  let schema = listedSchemas.get(tool);
  if (!schema) {
    const { $schema: _dialect, ...json } = z.toJSONSchema(tool.inputSchema, { io: 'input', target: 'draft-7', unrepresentable: 'any' });
    schema = z.object({}).catchall(z.unknown()).meta(json);
    listedSchemas.set(tool, schema);
  }
  return schema;
}

/** The request facts, from a v2 context (`ctx.mcpReq`) or a 1.x one (`extra.authInfo`, 2025 revisions only). */
function callFacts(server: McpServerLike, extra: unknown): { authInfo: AuthInfo | undefined; facts: RequestFacts } {
  const ctx = extra as Partial<ServerContext> & { authInfo?: AuthInfo; _meta?: unknown };
  if (ctx?.mcpReq) return { authInfo: ctx.http?.authInfo, facts: requestFacts(server.server as Server, ctx as ServerContext) };
  // The 1.x line speaks only 2025 revisions: no input round, so an 'approval' tool gives its link as a tool result
  // and a 'required' one answers CONFIRMATION_UNAVAILABLE (unless the deployment opts it out), as on any 2025-era request.
  return {
    authInfo: ctx?.authInfo,
    facts: { era: 'legacy', canElicitForms: false, canElicitUrls: false, likelyReplay: hasReplayHint(ctx?._meta) },
  };
}

function register<S extends ToolRuntime>(
  helper: string,
  server: McpServerLike,
  tool: ToolDefinition<S>,
  options: RegisterToolOptions<S>,
): unknown {
  if (typeof server?.registerTool !== 'function' || typeof server.server !== 'object') {
    throw new TypeError(
      `${helper} needs an McpServer of @modelcontextprotocol/server 2.x or @modelcontextprotocol/sdk 1.23 or later (one with registerTool)`,
    );
  }
  const others = (options.tools ?? []).filter((other) => other.name !== tool.name);
  const tools = new Map([[tool.name, tool], ...others.map((other) => [other.name, other] as const)]);
  const refuse = (): ToolAnswer =>
    isWriteTool(tool)
      ? toCallToolResult(WriteResults.rejected('', { code: ErrorCode.UNAUTHORIZED, message: NOT_AUTHENTICATED }), tool.keyField)
      : { content: [{ type: 'text', text: readErrorText(ErrorCode.UNAUTHORIZED, NOT_AUTHENTICATED) }], isError: true };
  const config = {
    title: tool.title,
    description: tool.description,
    inputSchema: listedInputSchema(tool),
    outputSchema: tool.outputSchema,
    annotations: tool.annotations,
  };
  const callback = async (args: Record<string, unknown> | undefined, extra: unknown): Promise<ToolAnswer> => {
    const { authInfo, facts } = callFacts(server, extra);
    const tenant = verifiedTenant(options.tenant as RegisterToolOptions<ToolRuntime>['tenant'], authInfo);
    if (tenant === undefined) return refuse();
    return callTool(tool, args, {
      services: options.services,
      caller: { tenant, subject: authInfo?.clientId ?? 'unknown', scopes: authInfo?.scopes ?? [] },
      remainingTimeMs: options.remainingTimeMs,
      tools,
      ...facts,
    });
  };
  return (server.registerTool as (name: string, config: object, callback: object) => unknown)(tool.name, config, callback);
}

/**
 * Puts an idempotent write tool (from `defineWriteTool`) on your own `McpServer` (SDK 2.x, or 1.23 or later): a
 * retry with the same key replays the first result instead of running again. It keeps the contract there too: a
 * call without a verified tenant is refused (`rejected` / UNAUTHORIZED, nothing runs); invalid or undeclared
 * arguments answer `rejected` / INVALID_ARGUMENTS; 'approval' tools send the person to the approval page (an input
 * request, or the link as an APPROVAL_REQUIRED result for a client without URL mode, the 1.x line included);
 * 'required' tools ask in a form on 2026-07-28 and answer CONFIRMATION_UNAVAILABLE where the request cannot ask.
 * Returns the SDK's RegisteredTool.
 * @public
 */
export function registerWriteTool<S extends ToolRuntime, M extends McpServerLike>(
  server: M,
  tool: WriteToolDefinition<S>,
  options: RegisterToolOptions<S>,
): ReturnType<M['registerTool']> {
  if (!isWriteTool(tool))
    throw new TypeError(
      `registerWriteTool: ${String((tool as { name?: unknown })?.name)} is not a defineWriteTool result (use registerReadTool)`,
    );
  return register('registerWriteTool', server, tool, options) as ReturnType<M['registerTool']>;
}

/**
 * Puts a read tool (from `defineReadTool`, or the toolkit's `getOperationStatusTool` / `issueOperationIdTool` with
 * `tools`: the write tools they answer for) on your own `McpServer`, with the same tenant rule and argument checks
 * as registerWriteTool. Returns the SDK's RegisteredTool.
 * @public
 */
export function registerReadTool<S extends ToolRuntime, M extends McpServerLike>(
  server: M,
  tool: ToolDefinition<S>,
  options: RegisterToolOptions<S>,
): ReturnType<M['registerTool']> {
  if (tool?.kind !== 'read')
    throw new TypeError(
      `registerReadTool: ${String((tool as { name?: unknown })?.name)} is not a defineReadTool result (use registerWriteTool)`,
    );
  return register('registerReadTool', server, tool, options) as ReturnType<M['registerTool']>;
}
