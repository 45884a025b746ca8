import { createFaultFetch } from '../client/fault-fetch';

/*
 * The calls of `npm run chaos` (chaos.ts): raw MCP tools/call over HTTP, through a fetch that can lose the response
 * on the way back, read as the result contract's fields.
 */

export const TENANTS = ['chaos-a', 'chaos-b'] as const;
export type Tenant = (typeof TENANTS)[number];

export interface Answer {
  outcome?: string;
  retryable?: boolean;
  retry_after_ms?: number;
  code?: string;
  message?: string;
  resource?: string;
  /** No answer in the contract: a transport error, an HTTP status, a JSON-RPC error. */
  failure?: string;
}

/** Calls the stack's tools as one tenant or another, with a bearer token each (`tokens`, set before the first call). */
export class ChaosCaller {
  readonly tokens = {} as Record<Tenant, string>;
  private readonly faultFetch = createFaultFetch();
  private rpcId = 0;

  constructor(private readonly baseUrl: string) {}

  async callTool(
    tenant: Tenant,
    name: string,
    args: Record<string, unknown>,
    loseResponse: boolean,
  ): Promise<Answer & { structured?: Record<string, unknown> }> {
    if (loseResponse) this.faultFetch.inject({ tool: name, fault: { mode: 'lose-response' }, times: 1 });
    let response: Response;
    try {
      response = await this.faultFetch.fetch(`${this.baseUrl}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.tokens[tenant]}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++this.rpcId, method: 'tools/call', params: { name, arguments: args } }),
        signal: AbortSignal.timeout(20_000),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      return { failure: `transport: ${cause?.code ?? (err as Error).name}` };
    }
    const text = await response.text().catch(() => '');
    if (!response.ok) return { failure: `http ${response.status}` };
    let body: { result?: { structuredContent?: Record<string, unknown> }; error?: { code: number; message: string } };
    try {
      body = JSON.parse(text);
    } catch {
      return { failure: 'unparsable answer' };
    }
    if (body.error) return { failure: `json-rpc ${body.error.code}: ${body.error.message.slice(0, 120)}` };
    const structured = body.result?.structuredContent;
    if (!structured) return { failure: 'no structuredContent' };
    const error = structured.error as { code?: string; message?: string } | undefined;
    return {
      structured,
      outcome: structured.outcome as string | undefined,
      retryable: structured.retryable as boolean | undefined,
      retry_after_ms: structured.retry_after_ms as number | undefined,
      code: error?.code,
      message: error?.message,
    };
  }
}
