import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { inject } from 'vitest';
import type { WriteToolResult } from '../../lambdas/core/result-contract';
import { KEY_HEADER_NAMES, MCP_PARAM_HEADER_PREFIX } from '../../lambdas/mcp/param-headers';
import { startLocalStack, type LocalStack, type LocalStackOptions } from './local-stack';

/**
 * The local stack on the test run's shared DynamoDB Local, with its own table and a free port. The suites that pay
 * through 2025-era clients test idempotency, not confirmation: their stack lets those clients confirm on their side
 * (the deployment opt-out); test/integration/mcp-confirmation.test.ts starts one that asks the person.
 */
export async function startTestStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  process.env.DYNAMODB_ENDPOINT = inject('dynamodbEndpoint');
  return startLocalStack({ ...options, env: { CONFIRMATION_OPT_OUT_TOOLS: 'request_payment', ...options.env } });
}

/** An MCP SDK client over real HTTP, authenticated as `tenant`; tools are listed so the client checks outputSchemas. */
export async function connectClient(stack: LocalStack, tenant: string): Promise<Client> {
  const token = await stack.tokenFor(tenant);
  const client = new Client({ name: 'integration-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(stack.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  await client.listTools();
  return client;
}

export const MODERN_PROTOCOL = '2026-07-28';

/** Client capabilities of a 2026-07-28 client that can open a link (URL-mode elicitation). */
export const URL_ELICITATION = { elicitation: { url: {} } };

/** What the raw 2026-07-28 calls below read of a tools/call result. */
export type RawToolAnswer = Record<string, unknown> & {
  resultType?: string;
  requestState?: string;
  inputRequests?: { confirm: { method: string; params: { mode?: string; url: string; message: string } } };
  structuredContent?: Record<string, unknown>;
};

/**
 * The `Mcp-Param-*` headers a 2026-07-28 client mirrors a write tool's key into (its inputSchema marks the key with
 * `x-mcp-header`); the keys here are plain ASCII, sent as they are.
 */
export function keyHeaders(args: Record<string, unknown>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [field, name] of Object.entries(KEY_HEADER_NAMES))
    if (typeof args[field] === 'string') headers[`${MCP_PARAM_HEADER_PREFIX}${name}`] = args[field] as string;
  return headers;
}

/**
 * One raw 2026-07-28 tools/call, as any client sends it (headers, the key's among them, `_meta` with the client's capabilities, an optional
 * later round's `requestState` / `inputResponses`), without an SDK client: the JSON-RPC result.
 */
export async function rawToolCall(
  mcpUrl: string,
  token: string,
  name: string,
  args: Record<string, unknown>,
  round: { requestState?: string; inputResponses?: unknown } = {},
  capabilities: Record<string, unknown> = URL_ELICITATION,
): Promise<RawToolAnswer> {
  const response = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${token}`,
      'Mcp-Method': 'tools/call',
      'Mcp-Name': name,
      'Mcp-Protocol-Version': MODERN_PROTOCOL,
      ...keyHeaders(args),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name,
        arguments: args,
        ...round,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL,
          'io.modelcontextprotocol/clientCapabilities': capabilities,
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
        },
      },
    }),
  });
  if (response.status !== 200) throw new Error(`tools/call ${name}: HTTP ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { result: RawToolAnswer }).result;
}

/** One raw 2026-07-28 tools/list, as `rawToolCall` sends a call: the tools the server lists (HTTP 200 or it throws). */
export async function rawToolsList(
  mcpUrl: string,
  token: string,
): Promise<Array<{ name: string; inputSchema: { properties: Record<string, unknown> } }>> {
  const response = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${token}`,
      'Mcp-Method': 'tools/list',
      'Mcp-Protocol-Version': MODERN_PROTOCOL,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/list',
      params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL, 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  });
  if (response.status !== 200) throw new Error(`tools/list: HTTP ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { result: { tools: Array<{ name: string; inputSchema: { properties: Record<string, unknown> } }> } })
    .result.tools;
}

/** A 1.x or a v2 SDK client: what the call helpers below need of either. */
export type AnyMcpClient = Pick<Client, 'callTool'> | Pick<ModernClient, 'callTool'>;

/**
 * The v2 SDK client pinned to 2026-07-28 (`server/discover`, no handshake, `_meta` and Mcp-Method on every request),
 * over real HTTP, authenticated as `tenant`. `onConfirm` answers the server's form elicitations (the person's reply).
 */
export async function connectModernClient(
  stack: LocalStack,
  tenant: string,
  options: {
    onConfirm?: (
      message: string,
      params: Record<string, unknown>,
    ) => { action: 'accept' | 'decline' | 'cancel'; content?: Record<string, string | number | boolean | string[]> };
    /** Answers URL-mode elicitations (declare `capabilities: { elicitation: { url: {} } }`). */
    onElicit?: (params: Record<string, unknown>) => Promise<{ action: 'accept' | 'decline' | 'cancel' }>;
    capabilities?: Record<string, unknown>;
    fetch?: typeof fetch;
  } = {},
): Promise<ModernClient> {
  const token = await stack.tokenFor(tenant);
  const client = new ModernClient(
    { name: 'integration-test-2026', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: MODERN_PROTOCOL } },
      capabilities: options.capabilities ?? (options.onConfirm ? { elicitation: { form: {} } } : {}),
    },
  );
  if (options.onElicit) {
    const onElicit = options.onElicit;
    client.setRequestHandler('elicitation/create', (request) => onElicit(request.params as Record<string, unknown>));
  } else if (options.onConfirm) {
    const onConfirm = options.onConfirm;
    client.setRequestHandler('elicitation/create', (request) => {
      const params = request.params as Record<string, unknown>;
      return onConfirm(String(params.message), params);
    });
  }
  await client.connect(
    new ModernTransport(new URL(stack.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } }, fetch: options.fetch }),
  );
  await client.listTools();
  return client;
}

/** Calls a write tool and returns its structured result (the WriteToolResult contract), checking the MCP envelope. */
export async function callWrite<R = Record<string, unknown>>(
  client: AnyMcpClient,
  name: string,
  args: Record<string, unknown>,
): Promise<WriteToolResult<R>> {
  const answer = (await client.callTool({ name, arguments: args })) as { structuredContent?: unknown; isError?: boolean };
  const structured = answer.structuredContent as unknown as WriteToolResult<R>;
  if (!structured) throw new Error(`${name} answered without structuredContent: ${JSON.stringify(answer)}`);
  // An approval link is no failure: a plain result every client shows (isError false), whatever its outcome.
  const failed = structured.outcome !== 'succeeded' && structured.error?.code !== 'APPROVAL_REQUIRED';
  if (Boolean(answer.isError) !== failed) throw new Error(`isError ${answer.isError} does not match outcome ${structured.outcome}`);
  return structured;
}

export async function callRead(client: AnyMcpClient, name: string, args: Record<string, unknown>) {
  const answer = (await client.callTool({ name, arguments: args })) as {
    content?: unknown;
    isError?: boolean;
    structuredContent?: unknown;
  };
  const content = answer.content as Array<{ type: string; text: string }>;
  return {
    isError: Boolean(answer.isError),
    structured: answer.structuredContent as Record<string, unknown> | undefined,
    text: content[0]?.text ?? '',
  };
}

export const orderArgs = (key: string, overrides: Record<string, unknown> = {}) => ({
  idempotency_key: key,
  customer_id: 'cust-1',
  items: [{ sku: 'SKU-1', quantity: 2 }],
  currency: 'EUR',
  ...overrides,
});

export async function ledger(stack: LocalStack): Promise<{ orders: Array<Record<string, unknown>> }> {
  const response = await fetch(`${stack.url}/sandbox/ledger`);
  if (!response.ok) throw new Error(`ledger answered ${response.status}`);
  return (await response.json()) as { orders: Array<Record<string, unknown>> };
}
