import {
  type CallToolRequest,
  type JsonSchemaValidator,
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type Tool,
  type jsonSchemaValidator,
} from '@modelcontextprotocol/server';
import * as z from 'zod';
import type { Caller } from '../auth/verifier';
import { closestName } from '../core/closest-name';
import { TOOL_NAME_PATTERN } from '../core/idempotency-key';
import { callTool } from './define-read-tool';
import { type ParamHeaderScan, scanParamHeaders } from './param-headers';
import { requestFacts } from './register-write-tool';
import { serverInstructions, servedTools } from './served-tools';
import type { ToolDefinition, ToolRuntime } from './tool-types';

const SERVER_INFO = { name: 'idempotent-mcp', version: '0.1.0' };

/**
 * How long a 2026-07-28 client may keep `tools/list` and `server/discover` (SEP-2549 cache hints). The list is the
 * same for every caller and changes only with a deployment, which replaces every instance. Private: a shared cache
 * must not serve it to callers it never authenticated.
 */
const LIST_CACHE_HINT = { ttlMs: 5 * 60_000, cacheScope: 'private' } as const;

export interface BuildServerOptions<S extends ToolRuntime = ToolRuntime> {
  /**
   * The tools this server serves: these, and the toolkit's tools they need (`get_operation_status` with any write
   * tool, `issue_operation_id` with a tool that takes an operation id), and no others.
   */
  tools: readonly ToolDefinition<S>[];
  /** The Lambda's remaining time for this invocation. */
  remainingTimeMs?: () => number;
  /** The origin the request came to (the approval page's links when no public base URL is set). */
  origin?: string;
}

/**
 * The SDK's server uses a JSON Schema validator for one thing only: checking a client's answer to a pushed
 * (2025-era) form elicitation, which this server never sends (confirmations ride 2026-07-28 input requests, whose
 * answers each tool validates itself with zod). Without one it builds an Ajv instance for every Server, i.e. for
 * every request here. So it gets this one, which refuses: a tool that starts pushing elicitations fails loudly
 * instead of accepting unchecked input. Because nothing constructs Ajv, lib/bundling.ts can alias the SDK's `_shims`
 * entry (where v2 inlines Ajv) to a stub in the Lambda bundle; add a real validator here, and drop that alias,
 * before pushing elicitations.
 */
const noElicitationValidator: jsonSchemaValidator = {
  getValidator: (): JsonSchemaValidator<never> => {
    throw new Error('elicitation answers are not validated by this server: add a JSON Schema validator in lambdas/mcp/server.ts');
  },
};

// JSON Schemas are derived once per tool definition, not on every tools/list (one server per request).
const listings = new WeakMap<ToolDefinition, Tool>();
function listing(tool: ToolDefinition): Tool {
  let entry = listings.get(tool);
  if (!entry) {
    // draft-07, like the SDK's own McpServer: SDK clients validate structuredContent with a draft-07 validator.
    const toJson = (schema: z.ZodObject, io: 'input' | 'output') =>
      z.toJSONSchema(schema, { io, target: 'draft-7', unrepresentable: 'any' }) as Tool['inputSchema'];
    entry = {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: toJson(tool.inputSchema, 'input'),
      ...(tool.outputSchema ? { outputSchema: toJson(tool.outputSchema, 'output') as Tool['outputSchema'] } : {}),
      annotations: tool.annotations,
    };
    listings.set(tool, entry);
  }
  return entry;
}

// The Mcp-Param-* declarations of each tool, read from the very inputSchema tools/list serves, once per tool.
const headerScans = new WeakMap<ToolDefinition, ParamHeaderScan>();
/** The `x-mcp-header` declarations a tool's listed inputSchema makes (2026-07-28 clients mirror those arguments). */
export function paramHeaderScan(tool: ToolDefinition): ParamHeaderScan {
  let scan = headerScans.get(tool);
  if (!scan) headerScans.set(tool, (scan = scanParamHeaders(listing(tool).inputSchema)));
  return scan;
}

// Written once per tool list, not on every request (one server per request).
const instructions = new WeakMap<readonly ToolDefinition[], string | undefined>();
function instructionsFor(tools: readonly ToolDefinition[]): string | undefined {
  if (!instructions.has(tools)) instructions.set(tools, serverInstructions(tools));
  return instructions.get(tools);
}

/**
 * A NEW server for every request, bound to the authenticated caller: a server shared between clients leaks one
 * client's responses to another (CVE-2026-25536). The same server answers both protocol eras: 2025-era requests
 * (after `initialize`) and 2026-07-28 requests (each carrying its version in `_meta`, after `server/discover`).
 *
 * Tools are served through the SDK's low-level `Server` and its request handlers rather than
 * `McpServer.registerTool`: registerTool validates arguments itself and answers a failure with a bare text error,
 * while our contract answers it with `rejected` + INVALID_ARGUMENTS in structured content. So each tool validates its
 * own arguments.
 */
export function buildMcpServer<S extends ToolRuntime>(services: S, caller: Caller, options: BuildServerOptions<S>): Server {
  const tools = servedTools(options.tools);
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const mcp = new Server(SERVER_INFO, {
    instructions: instructionsFor(tools),
    jsonSchemaValidator: noElicitationValidator,
    capabilities: { tools: { listChanged: false } },
    cacheHints: { 'tools/list': LIST_CACHE_HINT, 'server/discover': LIST_CACHE_HINT },
    // A stateless 2025-era request cannot carry a server-to-client request: tools answer those clients themselves.
    inputRequired: { legacyShim: false },
  });
  // Stateless, a cancel can only name a request of its own batch, and no tool here can be cut off mid-flight (a
  // write runs to its engine deadline). MCP lets a receiver ignore a cancel for a request that cannot be cancelled.
  mcp.setNotificationHandler('notifications/cancelled', () => {});
  mcp.setRequestHandler('tools/list', (request) => {
    // Everything fits in one page, so this server never hands out a cursor: any cursor is not one of ours.
    if (request.params?.cursor !== undefined)
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor: this server lists every tool in one page');
    return { tools: tools.map(listing) };
  });
  mcp.setRequestHandler('tools/call', async (request: CallToolRequest, ctx) => {
    const tool = byName.get(request.params.name);
    if (!tool) {
      // Only a name that could be a tool's (a long one would cost the distance computation per character).
      const name = request.params.name;
      const meant = TOOL_NAME_PATTERN.test(name)
        ? closestName(name, byName.keys(), { within: Math.max(2, Math.floor(name.length / 3)) })
        : undefined;
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `Unknown tool: ${name.slice(0, 64)}.${meant ? ` Did you mean ${meant}?` : ''} tools/list names every tool.`,
      );
    }
    return callTool(tool, request.params.arguments, {
      services,
      caller,
      remainingTimeMs: options.remainingTimeMs,
      tools: byName,
      origin: options.origin,
      ...requestFacts(mcp, ctx),
    });
  });
  return mcp;
}
