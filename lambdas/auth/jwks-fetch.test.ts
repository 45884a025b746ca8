import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { startKeySetServer, type KeySetServer } from '../../test/support/key-set-server';
import { loadDevIssuer } from './dev-issuer';
import { fetchJwks } from './jwks-fetch';
import { AuthUnavailableError, createTokenVerifier } from './verifier';

/** The key set fetch jose makes through `node:http(s)`: what jose reads from it must match what `fetch` gives. */
describe('fetchJwks', () => {
  const jwks = { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'k1' }] };
  const seen: Array<{ method?: string; accept?: string }> = [];
  let server: Server;
  let base: string;
  let closedPort: number;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ method: req.method, accept: req.headers.accept });
      if (req.url === '/jwks.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(jwks));
      } else if (req.url === '/moved') {
        res.writeHead(302, { location: '/jwks.json' });
        res.end();
      } else if (req.url === '/no-content') {
        res.writeHead(204);
        res.end();
      } else if (req.url === '/cut') {
        // The connection drops halfway through the key set.
        res.writeHead(200, { 'content-length': '1000' });
        res.write('{"keys":[');
        setTimeout(() => req.socket.destroy(), 10);
      } else if (req.url === '/malformed') {
        // JSON, but not a key set (a proxy's or a misconfigured issuer's answer).
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"keys":"none"}');
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
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
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
    await expect(fetchJwks(`${base}/huge`, {})).rejects.toMatchObject({
      name: 'TypeError',
      cause: { message: expect.stringMatching(/larger than/) },
    });
  });

  it("fails with the signal's TimeoutError when the issuer does not answer in time", async () => {
    await expect(fetchJwks(`${base}/silent`, { signal: AbortSignal.timeout(50) })).rejects.toMatchObject({ name: 'TimeoutError' });
  });

  it('fails when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    // As `fetch` fails: a TypeError without a `code`, the Node error as its cause.
    await expect(fetchJwks(`http://127.0.0.1:${port}/jwks.json`, {})).rejects.toMatchObject({
      name: 'TypeError',
      cause: { code: 'ECONNREFUSED' },
    });
  });

  it('fails, rather than throwing out of the promise, on a status a Response cannot carry a body with', async () => {
    await expect(fetchJwks(`${base}/no-content`, {})).rejects.toMatchObject({ name: 'TypeError' });
  });

  // What a client sees: an issuer that cannot be reached is our outage (503, retry), never a bad token (401).
  it.each([
    ['nothing listens', () => `http://127.0.0.1:${closedPort}/jwks.json`],
    ['the connection drops mid-body', () => `${base}/cut`],
    ['the TLS handshake fails', () => `${base.replace('http:', 'https:')}/jwks.json`],
    ['it answers 204', () => `${base}/no-content`],
    ['it serves something that is not a key set', () => `${base}/malformed`],
  ])('the verifier reports the issuer unavailable when %s', async (_case, jwksUrl) => {
    const verifier = createTokenVerifier({
      mode: 'oidc',
      issuer: 'https://issuer.example',
      jwksUrl: jwksUrl(),
      tenantClaim: 'tenant',
      requiredScopes: [],
    });
    // Well-formed but unverifiable: the key set is fetched before the signature is checked.
    const token =
      ['{"alg":"ES256","kid":"k1"}', '{"sub":"s","exp":9999999999}'].map((part) => Buffer.from(part).toString('base64url')).join('.') +
      '.c2ln';
    await expect(verifier.verify(`Bearer ${token}`)).rejects.toBeInstanceOf(AuthUnavailableError);
  });
});

/** The issuer's key set, read at init (prefetch) so the first request does not wait for it, and refetched when needed. */
describe('the verifier and the issuer key set', () => {
  const ISSUER = 'https://issuer.example';
  let dirs: string[] = [];
  /** What the issuer serves now and whether it refuses the next GETs; each GET is counted and settles `nextGet()`. */
  let keySet: KeySetServer;
  let jwksUrl: string;

  const issuer = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'jwks-rotation-'));
    dirs.push(dir);
    return loadDevIssuer({ dir, issuer: ISSUER, audience: 'api', tenantClaim: 'tenant' });
  };
  const verifier = () =>
    createTokenVerifier({ mode: 'oidc', issuer: ISSUER, audience: 'api', jwksUrl, tenantClaim: 'tenant', requiredScopes: [] });
  const nextGet = () => new Promise<void>((resolve) => (keySet.onGet = resolve));
  /** A verifier whose prefetch has reached the issuer (served or refused). */
  const prefetched = async () => {
    const v = verifier();
    const reached = nextGet();
    v.prefetch!();
    await reached;
    return v;
  };

  beforeAll(async () => {
    keySet = await startKeySetServer();
    jwksUrl = keySet.url;
  });
  afterAll(async () => {
    vi.useRealTimers();
    await keySet.close();
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
    dirs = [];
  });
  beforeEach(() => {
    keySet.gets = 0;
    keySet.failNext = 0;
  });

  it('prefetch reads the key set before any request, and the first request then verifies without fetching it', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = await prefetched();
    expect(keySet.gets).toBe(1);
    await expect(v.verify(`Bearer ${await current.sign({ tenant: 't1' })}`)).resolves.toMatchObject({ tenant: 't1' });
    expect(keySet.gets).toBe(1);
  });

  it("prefetch also imports the key set's keys, so the first request's verification imports none", async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const importKey = vi.spyOn(crypto.subtle, 'importKey');
    try {
      const token = `Bearer ${await current.sign({ tenant: 't4' })}`;
      const v = await prefetched();
      // The import follows the fetch during init (on Lambda, while the runtime waits for the first event).
      await vi.waitFor(() => expect(importKey).toHaveBeenCalledTimes(1), { timeout: 5000 });
      importKey.mockClear();
      await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't4' });
      expect(importKey).not.toHaveBeenCalled();
    } finally {
      importKey.mockRestore();
    }
  });

  it('a key set the prefetch could not get is fetched by the first request that needs it', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    keySet.failNext = 1;
    const v = await prefetched();
    await expect(v.verify(`Bearer ${await current.sign({ tenant: 't2' })}`)).resolves.toMatchObject({ tenant: 't2' });
    expect(keySet.gets).toBe(2);
  });

  // Retried: the refetch has the verifier's 3 s limit (jose's timeoutDuration), which a machine loaded by the whole
  // suite has passed once (a fresh clone's .ci/run at load 10); the rule under test does not depend on it.
  it('a token signed by a rotated key verifies once the key set is fetched again (after the cooldown)', { retry: 2 }, async () => {
    const before = await issuer();
    const after = await issuer();
    keySet.served = before.jwks;
    const v = await prefetched();
    // The issuer rotates: its set now names the new key (and still the old one, as issuers do during a rotation).
    keySet.served = { keys: [...after.jwks.keys, ...before.jwks.keys] };
    const token = `Bearer ${await after.sign({ tenant: 't3' })}`;
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 31_000);
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't3' });
    expect(keySet.gets).toBe(2);
    vi.useRealTimers();
  });
});
