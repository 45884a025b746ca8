import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { fullJitterBackoffMs } from '../lambdas/core/backoff';

/**
 * How many attempts and how much time one call may spend, and how the waits between attempts grow.
 *
 * @public
 */
export interface RetryOptions {
  /** Attempts per call, the first included. Default 5. */
  maxAttempts?: number;
  /** Total time one call may spend, waits included; a wait that would cross it is not started. Default 30 s. */
  maxElapsedMs?: number;
  /** First backoff ceiling. Default 200 ms. */
  baseDelayMs?: number;
  /** Largest backoff ceiling (the server's retry_after_ms may exceed it). Default 5 s. */
  maxDelayMs?: number;
}

export type ResolvedRetryOptions = Required<RetryOptions>;

export const DEFAULT_RETRY: ResolvedRetryOptions = {
  maxAttempts: 5,
  maxElapsedMs: 30_000,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
};

/**
 * Exponential backoff with full jitter (a random wait in [0, ceiling)), so many agents retrying the same outage
 * spread out; the server's retry_after_ms is a floor because it knows when an answer can exist (a reconciler period).
 * `retryIndex` is 0 for the wait before the second attempt.
 */
export function backoffDelay(
  retryIndex: number,
  options: Pick<ResolvedRetryOptions, 'baseDelayMs' | 'maxDelayMs'>,
  random: () => number,
  serverRetryAfterMs?: number,
): number {
  const jittered = fullJitterBackoffMs(retryIndex, { baseMs: options.baseDelayMs, capMs: options.maxDelayMs }, random);
  return Math.max(jittered, serverRetryAfterMs ?? 0);
}

/**
 * What went wrong below the result contract, and whether calling again with the same key can help.
 *
 * @public
 */
export interface TransportFailure {
  /** `transport`: the request may or may not have arrived (retry with the same key); `deterministic`: it will fail again. */
  kind: 'transport' | 'deterministic';
  /** A short, log-safe description (no bodies, no keys). */
  message: string;
  /** The HTTP status of the failed answer, when there was one. */
  httpStatus?: number;
  /** The JSON-RPC error the server answered with. */
  jsonRpcCode?: number;
  /** The SDK saw the connection close: it cannot carry the next attempt. */
  connectionClosed?: boolean;
  /** The server's Retry-After, in ms, when it sent one. */
  retryAfterMs?: number;
}

/**
 * An HTTP answer that says "not now" (5xx, 429), raised by the client's fetch seam so its Retry-After survives.
 */
export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    readonly retryAfterMs?: number,
  ) {
    super(`HTTP ${status}`);
    this.name = 'HttpStatusError';
  }
}

/** Retry-After is seconds or an HTTP date; anything else is ignored. */
export function parseRetryAfter(header: string | null, now: number): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * Statuses that mean "not now" rather than "never": timeouts, throttling, server and gateway failures.
 */
export const isRetryableHttpStatus = (status: number) => status === 408 || status === 429 || status >= 500;

/** Error codes of sockets that broke or never opened: nothing the server said, so the same key may help. */
const NETWORK_ERROR_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

function networkErrorCode(err: unknown): string | undefined {
  for (let current = err, depth = 0; current && typeof current === 'object' && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_ERROR_CODES.has(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Sorts an error thrown by the MCP SDK (or the fetch below it) into "retry with the same key" or "return at once".
 * Unrecognised errors are deterministic: retrying a bug only burns the budget, and the key is kept anyway.
 */
export function classifyCallError(err: unknown): TransportFailure {
  if (err instanceof HttpStatusError) {
    return {
      kind: isRetryableHttpStatus(err.status) ? 'transport' : 'deterministic',
      message: `HTTP ${err.status}`,
      httpStatus: err.status,
      ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
    };
  }
  if (err instanceof SdkHttpError) {
    const status = err.status;
    const retryable = status > 0 && isRetryableHttpStatus(status);
    return {
      kind: retryable ? 'transport' : 'deterministic',
      message: status > 0 ? `HTTP ${status}` : 'unexpected HTTP answer',
      httpStatus: status,
    };
  }
  if (err instanceof SdkError && (err.code === SdkErrorCode.RequestTimeout || err.code === SdkErrorCode.ConnectionClosed)) {
    // The SDK raises these two itself when no answer came: the request may have been executed.
    const closed = err.code === SdkErrorCode.ConnectionClosed;
    return {
      kind: 'transport',
      message: closed ? 'connection closed' : 'request timed out',
      ...(closed ? { connectionClosed: true } : {}),
    };
  }
  if (err instanceof ProtocolError) return { kind: 'deterministic', message: `JSON-RPC error ${err.code}`, jsonRpcCode: err.code };
  const code = networkErrorCode(err);
  if (code) return { kind: 'transport', message: `network error ${code}` };
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
    return { kind: 'transport', message: 'request aborted' };
  if (err instanceof TypeError && err.message === 'fetch failed') return { kind: 'transport', message: 'network error' };
  return { kind: 'deterministic', message: err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 200) : 'unexpected error' };
}
