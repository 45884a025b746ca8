import type { FetchLike } from '@modelcontextprotocol/client';

/**
 * One fault `createFaultFetch` injects: the tool it hits, before or after the server answered, the fault, how many times.
 * @public
 */
export interface FaultRule {
  /** Only `tools/call` requests for this tool; without it, every POST. */
  tool?: string;
  /**
   * Only the round that carries the person's answers (`inputResponses`, MCP 2026-07-28): for a tool that asks for
   * confirmation, the request that runs the operation.
   */
  answered?: boolean;
  /**
   * How the fetch misbehaves, for tests and demos of the client's retries (give it as the client's `fetch`).
   * - `lose-response`: the request reaches the server and runs; its answer is read and thrown away, and the caller
   *   sees a reset connection (the case idempotency keys exist for).
   * - `refuse`: nothing is sent; the caller sees a refused connection.
   * - `status`: nothing is sent; the caller gets this HTTP status (with Retry-After if given).
   */
  fault: { mode: 'lose-response' } | { mode: 'refuse' } | { mode: 'status'; status: number; retryAfterSeconds?: number };
  /** How many matching requests it hits before it is spent. */
  times: number;
}

/** One request a `FaultFetch` saw (`FaultFetch['requests'][number]`). */
type RequestLogEntry = FaultFetch['requests'][number];

/**
 * A fetch that injects the faults of its rules, with the log of the requests it saw.
 * @public
 */
export interface FaultFetch {
  /** The faulty fetch: give it as the client's `fetch`; a request no rule matches goes to the wrapped fetch unchanged. */
  fetch: FetchLike;
  /** Adds a rule (a copy), effective from the next request; the first live rule that matches a request applies. */
  inject(rule: FaultRule): void;
  /** Every request seen, in order, and the fault it injected, if any. */
  readonly requests: readonly {
    /** The JSON-RPC method, or the HTTP method for bodiless requests. */
    method: string;
    tool?: string;
    /** It carried answers to the server's input requests. */
    answered?: boolean;
    /** The fault applied, if any. */
    fault?: FaultRule['fault']['mode'];
  }[];
  /** `tools/call` requests seen for a tool, faulted or not. */
  callsTo(tool: string): number;
}

function describe(init: RequestInit | undefined): { method: string; tool?: string; answered?: boolean } {
  if (typeof init?.body !== 'string') return { method: init?.method ?? 'GET' };
  try {
    const message = JSON.parse(init.body) as { method?: unknown; params?: { name?: unknown; inputResponses?: unknown } };
    const method = typeof message.method === 'string' ? message.method : 'response';
    const tool = method === 'tools/call' && typeof message.params?.name === 'string' ? message.params.name : undefined;
    const answered = message.params?.inputResponses !== undefined;
    return { method, ...(tool ? { tool } : {}), ...(answered ? { answered } : {}) };
  } catch {
    return { method: init.method ?? 'POST' };
  }
}

/** Shaped like undici's own network failures, so the client classifies them as it would the real ones. */
function networkError(code: 'ECONNRESET' | 'ECONNREFUSED'): TypeError {
  const cause = Object.assign(new Error(code === 'ECONNRESET' ? 'socket hang up' : 'connect ECONNREFUSED'), { code });
  return new TypeError('fetch failed', { cause });
}

/**
 * A fetch that injects transport faults by its rules (drop the answer, fail the request, ...), for tests and demos.
 * @public
 */
export function createFaultFetch(base: FetchLike = (url, init) => fetch(url, init)): FaultFetch {
  const rules: FaultRule[] = [];
  const requests: RequestLogEntry[] = [];

  const faultFetch: FetchLike = async (url, init) => {
    const seen = describe(init);
    const rule = rules.find(
      (r) =>
        r.times > 0 && (r.tool === undefined ? init?.method === 'POST' : r.tool === seen.tool) && (!r.answered || seen.answered === true),
    );
    requests.push(rule ? { ...seen, fault: rule.fault.mode } : seen);
    if (!rule) return base(url, init);
    rule.times -= 1;
    switch (rule.fault.mode) {
      case 'lose-response': {
        const response = await base(url, init);
        // Read the whole answer first: the server has finished, only the way back is broken.
        await response.arrayBuffer();
        throw networkError('ECONNRESET');
      }
      case 'refuse':
        throw networkError('ECONNREFUSED');
      case 'status': {
        const headers = new Headers({ 'content-type': 'text/plain' });
        if (rule.fault.retryAfterSeconds !== undefined) headers.set('retry-after', String(rule.fault.retryAfterSeconds));
        return new Response('injected fault', { status: rule.fault.status, headers });
      }
    }
  };

  return {
    fetch: faultFetch,
    inject: (rule) => rules.push({ ...rule, fault: { ...rule.fault } }),
    requests,
    callsTo: (tool) => requests.filter((r) => r.method === 'tools/call' && r.tool === tool).length,
  };
}
