import { TerminalToolError, TransientToolError, UncertainToolError } from 'idempotent-mcp/engine';

/** Every downstream call is bounded twice: by the caller's signal (the engine's deadline) and by its own timeout. */
export interface CallOptions {
  signal: AbortSignal;
}

export interface HttpResult {
  status: number;
  headers: Headers;
  body: unknown;
}

/** Failure codes of downstream calls, as they appear in a stored error (and in the result contract). */
export const DownstreamErrorCode = {
  TIMEOUT: 'DOWNSTREAM_TIMEOUT',
  CONNECTION_LOST: 'DOWNSTREAM_CONNECTION_LOST',
  UNAVAILABLE: 'DOWNSTREAM_UNAVAILABLE',
  ERROR: 'DOWNSTREAM_ERROR',
  REJECTED: 'DOWNSTREAM_REJECTED',
  NOT_CONFIGURED: 'DOWNSTREAM_NOT_CONFIGURED',
} as const;

/** A downstream without a configured URL: nothing is sent, and a retry after the fix runs (transient). */
export function baseUrlOf(service: string, url: string | undefined): string {
  if (!url) throw new TransientToolError(DownstreamErrorCode.NOT_CONFIGURED, `${service} is not configured on this server`, 60_000);
  return url;
}

/** Connection errors raised before a byte was sent: the request never reached the downstream. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function errorCodeOf(err: unknown): string | undefined {
  let current = err as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 5; depth++) {
    if (typeof current.code === 'string') return current.code;
    current = current.cause as typeof current;
  }
  return undefined;
}

/**
 * One JSON request to a downstream, with every transport failure classified by what it tells us about the effect:
 * refused before sending is transient (nothing happened); a timeout or a connection lost after sending is
 * uncertain (it may have happened). HTTP statuses are left to the caller, which knows the downstream's semantics.
 */
export async function requestJson(
  service: string,
  url: string,
  init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: unknown },
  options: CallOptions & { timeoutMs: number },
): Promise<HttpResult> {
  const bounded = boundedSignal(options.signal, options.timeoutMs);
  const signal = bounded.signal;
  try {
    const response = await fetch(url, {
      method: init.method,
      headers: { accept: 'application/json', ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal,
    });
    const text = await response.text();
    let body: unknown;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined; // a proxy's HTML error page: the status says enough
      }
    }
    return { status: response.status, headers: response.headers, body };
  } catch (err) {
    if (signal.aborted) {
      throw new UncertainToolError(DownstreamErrorCode.TIMEOUT, `${service} did not answer in time`, { cause: err });
    }
    const code = errorCodeOf(err);
    if (code && NOT_SENT.has(code)) {
      throw new TransientToolError(DownstreamErrorCode.UNAVAILABLE, `${service} could not be reached; nothing was sent`, 1000, {
        cause: err,
      });
    }
    throw new UncertainToolError(DownstreamErrorCode.CONNECTION_LOST, `the connection to ${service} was lost during the request`, {
      cause: err,
    });
  } finally {
    bounded.settled();
  }
}

/**
 * `signal`, aborted too after `timeoutMs`; call `settled()` once the request has settled. Node 20's
 * `AbortSignal.any` holds its sources weakly: an `AbortSignal.timeout` that nothing else references can be garbage
 * collected mid-request and then never fires, so a downstream that hangs would be waited on past its timeout (Node
 * 22, Lambda's runtime, keeps it). `settled` references it until the request is over.
 */
export function boundedSignal(signal: AbortSignal, timeoutMs: number): { signal: AbortSignal; settled(): void } {
  const timeout = AbortSignal.timeout(timeoutMs);
  return { signal: AbortSignal.any([signal, timeout]), settled: () => void timeout.aborted };
}

function retryAfterMs(headers: Headers): number | undefined {
  const value = headers.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? Math.round(seconds * 1000) : undefined;
}

/** The downstream's own error code and message, if its body follows `{ error: { code, message } }`. */
function downstreamError(body: unknown): { code?: string; message?: string } {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return {
    code: typeof error?.code === 'string' ? error.code : undefined,
    message: typeof error?.message === 'string' ? error.message : undefined,
  };
}

/**
 * The common meaning of a failed HTTP status for a write: 429 and 503 say the request was not processed (transient);
 * any other 5xx may hide a committed effect (uncertain); a 4xx is the downstream refusing the request (terminal).
 */
export function failureForStatus(service: string, result: HttpResult): Error {
  const { status } = result;
  const { code, message } = downstreamError(result.body);
  if (status === 429 || status === 503) {
    return new TransientToolError(
      DownstreamErrorCode.UNAVAILABLE,
      `${service} is unavailable (HTTP ${status}); nothing was done`,
      retryAfterMs(result.headers) ?? 1000,
    );
  }
  if (status >= 500) {
    return new UncertainToolError(DownstreamErrorCode.ERROR, `${service} failed (HTTP ${status}); the outcome is unknown`);
  }
  return new TerminalToolError(
    code ? code.toUpperCase() : DownstreamErrorCode.REJECTED,
    message ? `${service} refused the request: ${message}` : `${service} refused the request (HTTP ${status})`,
  );
}

/** Read-only look-ups: any failure means "could not ask", which the reconciler turns into a later retry. */
export class LookupFailedError extends Error {
  constructor(service: string, detail: string) {
    super(`${service} look-up failed: ${detail}`);
    this.name = 'LookupFailedError';
  }
}

export async function lookupJson(service: string, url: string, options: CallOptions & { timeoutMs: number }): Promise<HttpResult> {
  let result: HttpResult;
  try {
    result = await requestJson(service, url, { method: 'GET' }, options);
  } catch (err) {
    throw new LookupFailedError(service, (err as Error).message);
  }
  if (result.status >= 500 || result.status === 429) throw new LookupFailedError(service, `HTTP ${result.status}`);
  return result;
}
