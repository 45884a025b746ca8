import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation';
import {
  type CallToolRequest,
  CancelledNotificationSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import type { Caller } from '../auth/verifier';
import type { Services } from '../runtime/services';
import type { ToolDefinition } from './tool-types';
import { tools as registeredTools } from './tools';

export const SERVER_INFO = { name: 'idempotent-mcp', version: '0.1.0' };

const INSTRUCTIONS =
  'Write tools never run twice for the same idempotency_key (or operation_id): generate a key once per intended ' +
  'operation and reuse it on every retry. Every write result has an `outcome`; retry only when `retryable` is true, ' +
  'with the same key, after `retry_after_ms`. Use get_operation_status to ask what became of an earlier call.';

/**
 * Registered for `tools/call` in place of the SDK's CallToolRequestSchema. The SDK parses a request with the
 * registered schema before anything else, and a failed parse leaves as -32603 (internal error), which tells a client
 * the server failed and a retry may help. Registered loosely, the request reaches the SDK's own tools/call check,
 * which answers a malformed call with -32602 (invalid params): the client's mistake, not worth retrying.
 */
const AnyToolsCall = z.looseObject({ method: z.literal('tools/call') });

export interface BuildServerOptions {
  /** Defaults to the registry in ./tools; tests add tools of their own. */
  tools?: readonly ToolDefinition[];
  /** The Lambda's remaining time for this invocation. */
  remainingTimeMs?: () => number;
}

/**
 * The SDK's server uses a JSON Schema validator for one thing only: checking a client's answer to a form
 * elicitation (`elicitInput`), which no tool here requests. Without one it builds an Ajv instance (plus formats) for
 * every Server, i.e. for every request here. So it gets this one, which refuses: a tool that starts eliciting fails
 * loudly instead of accepting unchecked input. Because nothing constructs Ajv, lib/bundling.ts can alias `ajv` and
 * `ajv-formats` to stubs in the Lambda bundles (about 130 KiB less to load); add a real validator here, and drop
 * those aliases, before using elicitation.
 */
const noElicitationValidator: jsonSchemaValidator = {
  getValidator: () => {
    throw new Error('elicitation answers are not validated by this server: add a JSON Schema validator in lambdas/mcp/server.ts');
  },
};

// JSON Schemas are derived once per tool definition, not on every tools/list (one server per request).
const listings = new WeakMap<ToolDefinition, Tool>();
function listing(tool: ToolDefinition): Tool {
  let entry = listings.get(tool);
  if (!entry) {
    // draft-07, like the SDK's own McpServer: the SDK client validates structuredContent with a draft-07 Ajv.
    const toJson = (schema: z.ZodObject, io: 'input' | 'output') =>
      z.toJSONSchema(schema, { io, target: 'draft-7', unrepresentable: 'any' }) as Tool['inputSchema'];
    entry = {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: toJson(tool.inputSchema, 'input'),
      outputSchema: toJson(tool.outputSchema, 'output'),
      annotations: tool.annotations,
    };
    listings.set(tool, entry);
  }
  return entry;
}

/**
 * A NEW server for every request, bound to the authenticated caller: a server shared between clients leaks one
 * client's responses to another (CVE-2026-25536; SDK 1.32 refuses a reused stateless transport).
 *
 * Tools are served through the SDK's low-level `Server` and its request handlers rather than
 * `McpServer.registerTool`: registerTool validates arguments itself and answers a failure with a bare text error,
 * while our contract answers it with `rejected` + INVALID_ARGUMENTS in structured content. So each tool validates its
 * own arguments. (McpServer would only wrap this Server, and add 21 KiB to the cold start.)
 */
export function buildMcpServer(services: Services, caller: Caller, options: BuildServerOptions = {}): Server {
  const tools = options.tools ?? registeredTools;
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const mcp = new Server(SERVER_INFO, { instructions: INSTRUCTIONS, jsonSchemaValidator: noElicitationValidator, capabilities: { tools: { listChanged: false } } });
  // Stateless, a cancel can only name a request of its own batch, and no tool here can be cut off mid-flight (a
  // write runs to its engine deadline). The SDK would drop that request's response, and a JSON response waits for
  // every request of its batch: the HTTP request (and the Lambda invocation) would hang until timed out. MCP lets a
  // receiver ignore a cancel for a request that cannot be cancelled, so this one does.
  mcp.setNotificationHandler(CancelledNotificationSchema, () => {});
  mcp.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools.map(listing) }));
  mcp.setRequestHandler(AnyToolsCall, async (raw) => {
    // Checked by the SDK's tools/call wrapper before this runs (see AnyToolsCall).
    const request = raw as unknown as CallToolRequest;
    const tool = byName.get(request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name.slice(0, 64)}`);
    return tool.call(request.params.arguments, { services, caller, remainingTimeMs: options.remainingTimeMs, tools: byName });
  });
  return mcp;
}
