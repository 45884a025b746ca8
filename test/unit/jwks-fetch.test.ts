import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchJwks } from '../../lambdas/auth/jwks-fetch';

/** The key set fetch jose makes through `node:http(s)`: what jose reads from it must match what `fetch` gives. */
describe('fetchJwks', () => {
  const jwks = { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'k1' }] };
  const seen: Array<{ method?: string; accept?: string }> = [];
  let server: Server;
  let base: string;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ method: req.method, accept: req.headers.accept });
      if (req.url === '/jwks.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(jwks));
      } else if (req.url === '/moved') {
        res.writeHead(302, { location: '/jwks.json' });
        res.end();
      } else if (req.url === '/huge') {
        res.writeHead(200);
        res.end(Buffer.alloc(2 * 1024 * 1024, 'a'));
      } else if (req.url !== '/silent') {
        res.writeHead(404);
        res.end();
      } // '/silent' never answers
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('returns the status and the JSON body, sending the headers jose asks for', async () => {
    const response = await fetchJwks(`${base}/jwks.json`, { method: 'GET', headers: new Headers({ accept: 'application/jwk-set+json' }) });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(jwks);
    expect(seen.at(-1)).toEqual({ method: 'GET', accept: 'application/jwk-set+json' });
  });

  it('does not follow redirects and passes other statuses through (jose refuses anything but 200)', async () => {
    expect((await fetchJwks(`${base}/moved`, {})).status).toBe(302);
    expect((await fetchJwks(`${base}/missing`, {})).status).toBe(404);
  });

  it('refuses a body far larger than any key set', async () => {
    await expect(fetchJwks(`${base}/huge`, {})).rejects.toThrow(/larger than/);
  });

  it("fails with the signal's TimeoutError when the issuer does not answer in time", async () => {
    await expect(fetchJwks(`${base}/silent`, { signal: AbortSignal.timeout(50) })).rejects.toMatchObject({ name: 'TimeoutError' });
  });

  it('fails when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    await expect(fetchJwks(`http://127.0.0.1:${port}/jwks.json`, {})).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
