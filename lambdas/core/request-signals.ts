/** The shape of `fetch` the MCP SDK's transports take (its `FetchLike`), named here so the core imports no package. */
export type FetchFunction = (url: string | URL, init?: RequestInit) => Promise<Response>;

/**
 * Wraps `base` so each request gets its own abort signal, linked to the caller's signal for exactly as long as the
 * request lasts. The MCP SDK's streamable-HTTP transport gives every request of a connection the same transport-wide
 * signal, and fetch (undici) adds an abort listener to the signal of each request that it removes only on abort or
 * when the request is garbage-collected: over a connection kept across calls (the gateway's upstream connection in a
 * warm Lambda, an agent's client session) listeners pile up on that one signal. Here the request's own signal takes
 * undici's listener, and the link to the caller's signal is removed when the request is over: fetch rejected, the
 * answer has no body, or its body was read to the end, failed or was cancelled. While a body streams (an SSE answer)
 * the link stays, so aborting the caller's signal (closing the transport) still aborts the request and its stream.
 * No I/O of its own: it only arranges the signals of the fetch it is given.
 */
export function withRequestSignals(base: FetchFunction): FetchFunction {
  return async (url, init) => {
    const parent = init?.signal;
    // Nothing to link, or already aborted: fetch rejects at once and adds no listener.
    if (!parent || parent.aborted) return base(url, init);
    const own = new AbortController();
    const forward = () => own.abort(parent.reason);
    parent.addEventListener('abort', forward, { once: true });
    const unlink = () => parent.removeEventListener('abort', forward);
    let response: Response;
    try {
      response = await base(url, { ...init, signal: own.signal });
    } catch (err) {
      unlink();
      throw err;
    }
    if (!response.body) {
      unlink();
      return response;
    }
    const reader = response.body.getReader();
    // Reads only when its reader reads (high water mark 0): nothing is read ahead of the caller.
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch (err) {
            unlink();
            controller.error(err);
            return;
          }
          if (!chunk.done) return controller.enqueue(chunk.value);
          unlink();
          controller.close();
        },
        cancel(reason) {
          unlink();
          return reader.cancel(reason);
        },
      },
      { highWaterMark: 0 },
    );
    const relayed = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    // A constructed Response has no URL or redirect flag; the SDK reads them to explain a redirect it did not follow.
    for (const key of ['url', 'redirected', 'type'] as const) Object.defineProperty(relayed, key, { value: response[key] });
    return relayed;
  };
}
