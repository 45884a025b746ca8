import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** Key sets are a few KiB; anything far larger is not one. */
const MAX_JWKS_BYTES = 1024 * 1024;

/**
 * The key set fetch jose makes (its `customFetch` option), over `node:https` rather than the global `fetch`.
 * The first `fetch` in a process loads undici's HTTP client (its llhttp WebAssembly parser included): tens of
 * milliseconds of every cold start, for one small GET (bench/cold-start.ts). jose reads only `status` and `json()`.
 */
export function fetchJwks(
  url: string,
  options: { headers?: ConstructorParameters<typeof Headers>[0]; signal?: AbortSignal; method?: string },
): Promise<Response> {
  const send = new URL(url).protocol === 'http:' ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    // Redirects are not followed (jose asks for `redirect: 'manual'`): a moved key set answers non-200, an error.
    const req = send(url, { method: options.method ?? 'GET', headers: Object.fromEntries(new Headers(options.headers)), signal: options.signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_JWKS_BYTES) req.destroy(new Error(`the key set at ${url} is larger than ${MAX_JWKS_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('error', reject);
      res.on('end', () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 500 })));
    });
    // An aborted request fails with the signal's reason (a TimeoutError), which jose reports as a JWKS timeout.
    req.on('error', (err) => reject(options.signal?.aborted ? options.signal.reason : err));
    req.end();
  });
}
