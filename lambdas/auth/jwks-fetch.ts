import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** Key sets are a few KiB; anything far larger is not one. */
const MAX_JWKS_BYTES = 1024 * 1024;

/**
 * The key set fetch jose makes (its `customFetch` option), over `node:https` rather than the global `fetch`.
 * The first `fetch` in a process loads undici's HTTP client (its llhttp WebAssembly parser included): tens of
 * milliseconds of every cold start, for one small GET (test/bench/cold-start.ts). jose reads only `status` and `json()`.
 */
export function fetchJwks(
  url: string,
  options: { headers?: ConstructorParameters<typeof Headers>[0]; signal?: AbortSignal; method?: string },
): Promise<Response> {
  const send = new URL(url).protocol === 'http:' ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    // Failures as `fetch` reports them: an abort with the signal's reason (a TimeoutError, which jose reports as a
    // JWKS timeout), anything else as a TypeError. The verifier answers an error without a `code` with 503 (the
    // issuer is unreachable); a Node error's code (ECONNREFUSED, ECONNRESET, a TLS code) would read as a bad token.
    const fail = (err: unknown) => reject(options.signal?.aborted ? options.signal.reason : new TypeError('fetch failed', { cause: err }));
    // Redirects are not followed (jose asks for `redirect: 'manual'`): a moved key set answers non-200, an error.
    const requestOptions = {
      method: options.method ?? 'GET',
      headers: Object.fromEntries(new Headers(options.headers)),
      signal: options.signal,
      // A fresh connection each time: the key set is fetched every few minutes at most, and a pooled socket could
      // outlive a Lambda freeze and fail the next fetch.
      agent: false as const,
    };
    const req = send(url, requestOptions, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_JWKS_BYTES) req.destroy(new Error(`the key set at ${url} is larger than ${MAX_JWKS_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('error', fail);
      res.on('end', () => {
        // `Response` refuses some statuses (204 and 304 with a body, above 599): thrown here, it would escape the
        // promise (an uncaught exception) and leave jose's pending fetch unsettled for every later request.
        try {
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 500 }));
        } catch (err) {
          fail(err);
        }
      });
    });
    req.on('error', fail);
    req.end();
  });
}
