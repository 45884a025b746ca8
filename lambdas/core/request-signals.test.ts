import { getEventListeners, setMaxListeners } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../local/free-port';
import { withRequestSignals } from './request-signals';

/**
 * The fetch a kept MCP connection sends through, against a real local HTTP server: one caller's signal (the SDK
 * transport's) over many requests keeps no listener once each request is over, and aborting it still ends a request
 * in flight and a body that streams.
 */
const fetchOwnSignals = withRequestSignals((url, init) => fetch(url, init));
let base: string;
let closedPort: number;
const streams: ServerResponse[] = [];
/** Resolves when the server sees the connection of its n-th event stream closed. */
const streamClosed: Array<Promise<void>> = [];
const server = createServer((req, res) => {
  if (req.url === '/json') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  } else if (req.url === '/no-content') {
    res.writeHead(204);
    res.end();
  } else if (req.url === '/moved') {
    res.writeHead(302, { location: '/json' });
    res.end();
  } else if (req.url === '/cut') {
    // The connection drops halfway through the body.
    res.writeHead(200, { 'content-length': '1000' });
    res.write('{"partial":');
    setImmediate(() => req.socket.destroy());
  } else if (req.url === '/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: first\n\n');
    streams.push(res);
    streamClosed.push(new Promise((resolve) => res.on('close', () => resolve())));
  } // '/silent' never answers
});

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  closedPort = await freePort();
});
afterAll(async () => {
  for (const res of streams) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const abortListeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

/** Each way a request ends, as the SDK's transport ends it. */
const endings: Record<string, (signal: AbortSignal) => Promise<unknown>> = {
  'body read to the end': async (signal) => (await fetchOwnSignals(`${base}/json`, { signal })).json(),
  'no body': (signal) => fetchOwnSignals(`${base}/no-content`, { signal }),
  'body cancelled': async (signal) => (await fetchOwnSignals(`${base}/json`, { signal })).body?.cancel(),
  'body failed halfway': async (signal) => {
    const response = await fetchOwnSignals(`${base}/cut`, { signal });
    await expect(response.text()).rejects.toThrow();
  },
  'fetch rejected': (signal) => expect(fetchOwnSignals(`http://127.0.0.1:${closedPort}/`, { signal })).rejects.toThrow(),
};

describe('a request that is over keeps no listener on the caller’s signal', () => {
  it.each(Object.keys(endings))('%s', async (ending) => {
    const parent = new AbortController();
    await endings[ending]!(parent.signal);
    expect(abortListeners(parent.signal)).toBe(0);
  });

  it('after 2000 requests over one signal, as over a kept connection', async () => {
    const parent = new AbortController();
    // A hundred requests at once are a hundred links while they last.
    setMaxListeners(200, parent.signal);
    const kinds = Object.values(endings);
    for (let batch = 0; batch < 20; batch++)
      await Promise.all(Array.from({ length: 100 }, (_, i) => kinds[(batch * 100 + i) % kinds.length]!(parent.signal)));
    expect(abortListeners(parent.signal)).toBe(0);
  });
});

it('the answer keeps what the caller reads of it: status, headers, URL, an unfollowed redirect', async () => {
  const signal = new AbortController().signal;
  const answer = await fetchOwnSignals(`${base}/json`, { signal });
  expect([answer.status, answer.headers.get('content-type'), answer.url]).toEqual([200, 'application/json', `${base}/json`]);
  expect(await answer.json()).toEqual({ ok: true });
  const moved = await fetchOwnSignals(`${base}/moved`, { signal, redirect: 'manual' });
  expect([moved.status, moved.headers.get('location'), moved.url, moved.redirected]).toEqual([302, '/json', `${base}/moved`, false]);
  await moved.body?.cancel();
});

describe('aborting the caller’s signal (the transport closing) still ends', () => {
  it('a request in flight', async () => {
    const parent = new AbortController();
    const pending = fetchOwnSignals(`${base}/silent`, { signal: parent.signal });
    parent.abort(new Error('transport closed'));
    await expect(pending).rejects.toThrow('transport closed');
    expect(abortListeners(parent.signal)).toBe(0);
  });

  it('a body that streams (an SSE answer): the reader fails and the server sees the connection closed', async () => {
    const parent = new AbortController();
    const response = await fetchOwnSignals(`${base}/events`, { signal: parent.signal });
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: first\n\n');
    // While the body streams, the request is still linked to the caller's signal.
    expect(abortListeners(parent.signal)).toBe(1);
    parent.abort(new Error('transport closed'));
    await expect(reader.read()).rejects.toThrow('transport closed');
    await streamClosed.at(-1);
    expect(abortListeners(parent.signal)).toBe(0);
  });
});
