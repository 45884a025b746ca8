import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../lambdas/http/app';
import { DEFAULT_DEV_SCOPE, DEV_ISSUER } from '../../lambdas/config';
import { newKey } from '../support/engine';
import { fixturePaymentArgs, FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';

/**
 * Raw HTTP against the local server: what a careless, hostile or broken client gets, and that the server survives it.
 * The calls run the fixture tools; whether anything ran is what reached the fixture downstream.
 */
let stack: FixtureStack;
let token: string;

beforeAll(async () => {
  // No background workers: nothing here queues an event or leaves a call to settle.
  stack = await startFixtureStack({ workers: { reconcilerTimer: false, relayPoller: false, consumerPoller: false } });
  token = await stack.tokenFor('tenant-hygiene');
});
afterAll(() => stack?.stop());

const MCP_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

function post(body: string, headers: Record<string, string> = {}) {
  return fetch(stack.mcpUrl, { method: 'POST', headers: { ...MCP_HEADERS, Authorization: `Bearer ${token}`, ...headers }, body });
}

const rpc = (id: number, method: string, params?: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
const writeArgs = (key: string) => ({ idempotency_key: key, note: 'hygiene' });
/** One fixture_write call, which books at the fixture downstream under `key`. */
const writeCall = (id: number, key = newKey()) => rpc(id, 'tools/call', { name: FixtureTool.write, arguments: writeArgs(key) });
/** Whether anything under the key reached the downstream. */
const ranUnder = (key: string) => stack.downstream.calls(key);

/** Nothing that looks like a stack trace or a file path of ours. */
function expectNoInternals(text: string) {
  expect(text).not.toMatch(/\n\s+at |\.ts:\d+|node_modules|\/work\/|Error: /);
}

/** The server still answers a real call after each abuse. */
async function expectStillServing() {
  const response = await post(writeCall(99));
  expect(response.status).toBe(200);
  const body = (await response.json()) as { result: { structuredContent: { outcome: string } } };
  expect(body.result.structuredContent.outcome).toBe('succeeded');
}

describe('protocol hygiene', () => {
  it('a browser Origin that is not allowed gets 403 (DNS-rebinding protection); a localhost Origin is served', async () => {
    const evil = await post(writeCall(1), { Origin: 'http://attacker.example' });
    expect(evil.status).toBe(403);
    expectNoInternals(await evil.text());
    const nullOrigin = await post(writeCall(2), { Origin: 'null' });
    expect(nullOrigin.status).toBe(403);

    const local = await post(writeCall(3), { Origin: 'http://localhost:6274' });
    expect(local.status).toBe(200);
    expect(local.headers.get('access-control-allow-origin')).toBe('http://localhost:6274');
    await expectStillServing();
  });

  it('a Host the server does not serve is refused before routing (DNS rebinding), whatever the route', async () => {
    const { request } = await import('node:http');
    // fetch sets Host from the URL: a raw request names the rebound host, as a browser on the rebound page would.
    const asHost = (host: string, path: string, method = 'GET', body?: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const url = new URL(stack.url);
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path,
            method,
            headers: { Host: host, Origin: `http://${host}`, ...(body ? { ...MCP_HEADERS, Authorization: `Bearer ${token}` } : {}) },
          },
          (res) => {
            let text = '';
            res.on('data', (chunk) => (text += chunk));
            res.on('end', () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.once('error', reject);
        req.end(body);
      });
    const port = new URL(stack.url).port;
    for (const path of ['/sandbox/ledger', '/mcp', '/health', '/approvals/x', '/dev-issuer/authorize']) {
      const refused = await asHost(
        `rebound.attacker.example:${port}`,
        path,
        path === '/mcp' ? 'POST' : 'GET',
        path === '/mcp' ? writeCall(5) : undefined,
      );
      expect(refused.status, path).toBe(403);
      expect(refused.text).toContain('Invalid Host');
      expect(refused.text).not.toContain('payments');
    }
    // The loopback names the server is reached by are served.
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) expect((await asHost(host, '/sandbox/ledger')).status, host).toBe(200);
  });

  it('every answer to a browser carries the CORS headers it needs (a 200 and a 401 alike), and caches key on Origin', async () => {
    const origin = 'http://localhost:6274';
    const served = await post(writeCall(20), { Origin: origin });
    const refused = await post(writeCall(21), { Origin: origin, Authorization: '' });
    const unnamed = await post(writeCall(22));
    expect([served.status, refused.status, unnamed.status]).toEqual([200, 401, 200]);
    for (const answer of [served, refused]) {
      expect(answer.headers.get('access-control-allow-origin')).toBe(origin);
      // A browser client reads these only when they are exposed: the login pointer (401) and the back-off (503).
      expect(answer.headers.get('access-control-expose-headers')?.split(',')).toEqual(
        expect.arrayContaining(['WWW-Authenticate', 'Retry-After']),
      );
    }
    expect(refused.headers.get('www-authenticate')).toContain('resource_metadata=');
    // Without an Origin there is no CORS grant, and the answer still varies on Origin (a cache must not reuse it for one).
    expect(unnamed.headers.get('access-control-allow-origin')).toBeNull();
    for (const answer of [served, refused, unnamed]) expect(answer.headers.get('vary')?.toLowerCase()).toContain('origin');
    expect(((await served.json()) as { result: { structuredContent: { outcome: string } } }).result.structuredContent.outcome).toBe(
      'succeeded',
    );
  });

  it('a mounted route whose answer has headers that cannot change still gets the CORS headers', async () => {
    const { Hono } = await import('hono');
    // A Response from fetch: its headers are immutable (a route that passes another server's answer on).
    const fetched = new Hono().get('/', () => fetch(`${stack.url}/health`));
    const answer = await createApp(stack.services, { tools: [], mounts: { '/fetched': fetched } }).request('http://localhost/fetched', {
      headers: { Origin: 'http://localhost:6274' },
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ status: 'ok' });
    expect(answer.headers.get('access-control-allow-origin')).toBe('http://localhost:6274');
    expect(answer.headers.get('vary')?.toLowerCase()).toContain('origin');
  });

  it('a chunked body (no Content-Length) is counted as it arrives: over 1 MB gets 413, a call under it is served', async () => {
    const { request } = await import('node:http');
    const url = new URL(stack.mcpUrl);
    const chunked = (chunks: string[]) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            headers: { ...MCP_HEADERS, Authorization: `Bearer ${token}`, 'Transfer-Encoding': 'chunked' },
          },
          (res) => {
            let text = '';
            res.on('data', (chunk) => (text += chunk));
            res.on('end', () => resolve({ status: res.statusCode!, text }));
          },
        );
        // The server may answer 413 and close before the whole body is written.
        req.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
        for (const chunk of chunks) req.write(chunk);
        req.end();
      });
    const call = writeCall(23);
    const served = await chunked([call.slice(0, 10), call.slice(10)]);
    expect(served.status).toBe(200);
    expect((JSON.parse(served.text) as { result: { structuredContent: { outcome: string } } }).result.structuredContent.outcome).toBe(
      'succeeded',
    );
    const huge = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { padding: 'x'.repeat(1024 * 1024) } });
    const refused = await chunked(Array.from({ length: Math.ceil(huge.length / 65536) }, (_, i) => huge.slice(i * 65536, (i + 1) * 65536)));
    expect(refused.status).toBe(413);
    expectNoInternals(refused.text);
    await expectStillServing();
  });

  it('a body over 1 MB gets 413 without being parsed', async () => {
    const huge = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { padding: 'x'.repeat(1024 * 1024) } });
    const response = await post(huge);
    expect(response.status).toBe(413);
    const body = await response.text();
    expectNoInternals(body);
    expect(JSON.parse(body)).toMatchObject({ jsonrpc: '2.0', error: { code: expect.any(Number) } });
    await expectStillServing();
  });

  it('malformed JSON gets a JSON-RPC parse error (-32700) with HTTP 400', async () => {
    for (const garbage of ['{"jsonrpc": "2.0", "id": 1, "method": ', 'not json at all', '{"jsonrpc":"2.0","id":1,"method":"tools/call"']) {
      const response = await post(garbage);
      expect(response.status).toBe(400);
      const body = await response.text();
      expectNoInternals(body);
      expect(JSON.parse(body)).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    }
    await expectStillServing();
  });

  it('an unknown method gets -32601', async () => {
    const response = await post(rpc(7, 'orders/teleport', {}));
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32601 } });
    await expectStillServing();
  });

  it('a tool call with nonsense params is an error result or a JSON-RPC error, never a stack trace', async () => {
    const cases = [
      rpc(8, 'tools/call', { name: FixtureTool.order, arguments: 'not an object' }),
      rpc(9, 'tools/call', { name: FixtureTool.order, arguments: { idempotency_key: newKey(), item: 42, quantity: 'many' } }),
      rpc(10, 'tools/call', {}),
      // biome-ignore lint/correctness/noPrecisionLoss: a quantity that overflows to Infinity is part of the nonsense.
      rpc(11, 'tools/call', { name: FixtureTool.order, arguments: { idempotency_key: newKey(), item: { $ne: 1 }, quantity: 1e309 } }),
    ];
    for (const body of cases) {
      const response = await post(body);
      const text = await response.text();
      expect(response.status).toBeLessThan(500);
      expectNoInternals(text);
    }
    // A malformed call is the client's mistake: invalid params (-32602, do not retry), not an internal error.
    for (const params of [{}, { name: 5 }, { name: FixtureTool.write, arguments: 'not an object' }]) {
      const response = await post(rpc(12, 'tools/call', params));
      expect(await response.json()).toMatchObject({
        id: 12,
        error: { code: -32602, message: expect.stringContaining('Invalid tools/call request') },
      });
    }
    await expectStillServing();
  });

  it('a batch that cancels its own tool call still gets its answer (a write is never cut off mid-flight)', async () => {
    // Cancelled requests get no response from the SDK, and a JSON-mode response waits for every request of the
    // batch: honoured, this cancel would hold the connection (and the Lambda invocation) until its timeout.
    const key = newKey();
    const batch = JSON.stringify([
      JSON.parse(writeCall(21, key)),
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 21, reason: 'changed my mind' } },
    ]);
    const response = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { ...MCP_HEADERS, Authorization: `Bearer ${token}` },
      body: batch,
      signal: AbortSignal.timeout(10_000),
    });
    expect(response.status).toBe(200);
    // The SDK answers a batch with one response as that response alone.
    const answers = [await response.json()].flat() as Array<{ id: number; result: { structuredContent: { outcome: string } } }>;
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ id: 21, result: { structuredContent: { outcome: 'succeeded', idempotency_key: key } } });
    expect(stack.downstream.bookings(key)).toHaveLength(1);
  });

  it('a batch whose ids repeat is refused as a whole (-32600) and nothing in it runs', async () => {
    const [k1, k2, k3] = [newKey(), newKey(), newKey()];
    const batches = [
      [JSON.parse(writeCall(1, k1)), JSON.parse(writeCall(1, k2))],
      [
        { jsonrpc: '2.0', id: 'x', method: 'ping' },
        { jsonrpc: '2.0', id: 'x', method: 'tools/call', params: { name: FixtureTool.write, arguments: writeArgs(k3) } },
      ],
    ];
    for (const batch of batches) {
      const response = await post(JSON.stringify(batch));
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    }
    expect([k1, k2, k3].map(ranUnder)).toEqual([0, 0, 0]);
    // No execution is on record either (none can commit later): each key now runs for the first time.
    for (const [id, key] of [k1, k2, k3].entries()) {
      const answer = (await (await post(writeCall(30 + id, key))).json()) as { result: { structuredContent: Record<string, unknown> } };
      expect(answer.result.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false, idempotency_key: key });
    }
    expect([k1, k2, k3].map(ranUnder)).toEqual([1, 1, 1]);
  });

  it('a batch whose id nests 10,000 levels deep (or is any object or array) is refused with 400, not a stack overflow', async () => {
    const key = newKey();
    const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`;
    const deepObject = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    const call = writeCall(1, key);
    for (const id of [deep, deepObject, '[1]', '{"a":1}']) {
      const response = await post(`[${call.replace('"id":1', `"id":${id}`)}, {"jsonrpc":"2.0","id":2,"method":"ping"}]`);
      expect(response.status, id.slice(0, 12)).toBe(400);
      expect(await response.json()).toMatchObject({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32600, message: expect.stringContaining('string, a number or null') },
      });
    }
    expect(ranUnder(key)).toBe(0);
    await expectStillServing();
  });

  it('an empty batch is an invalid request (-32600)', async () => {
    const response = await post('[]');
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    await expectStillServing();
  });

  it('a batch of distinct ids is answered in full', async () => {
    const response = await post(JSON.stringify([JSON.parse(writeCall(41)), { jsonrpc: '2.0', id: '41', method: 'ping' }]));
    expect(response.status).toBe(200);
    const answers = (await response.json()) as Array<{ id: unknown }>;
    expect(answers.map((a) => a.id).sort()).toEqual([41, '41'].sort());
  });

  it('a huge refused key or operation id is echoed only as its head and length, so the answer stays small', async () => {
    const huge = 'k'.repeat(1_000_000);
    const calls = [
      rpc(51, 'tools/call', { name: FixtureTool.write, arguments: writeArgs(huge) }),
      rpc(52, 'tools/call', { name: FixtureTool.payment, arguments: fixturePaymentArgs(huge) }),
    ];
    for (const call of calls) {
      const response = await post(call);
      const text = await response.text();
      expect(text.length).toBeLessThan(4096);
      const { result } = JSON.parse(text) as {
        result: { structuredContent: { outcome: string; idempotency_key: string }; content: { text: string }[] };
      };
      const echo = `${'k'.repeat(16)}… (1000000 characters)`;
      expect(result.structuredContent).toMatchObject({ outcome: 'rejected', idempotency_key: echo });
      expect(JSON.parse(result.content[1]!.text)).toMatchObject({ idempotency_key: echo });
    }
  });

  it('GET and DELETE on /mcp are 405 (stateless: no stream, no session)', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(stack.mcpUrl, { method, headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' } });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
    }
  });

  it('an unknown path is a plain 404', async () => {
    const response = await fetch(`${stack.url}/admin`);
    expect(response.status).toBe(404);
    expectNoInternals(await response.text());
  });
});

describe('authentication', () => {
  const resourceMetadata = () => `Bearer resource_metadata="${stack.url}/.well-known/oauth-protected-resource"`;

  it('no token: 401 pointing at the protected-resource metadata and naming the scope to ask for', async () => {
    const response = await fetch(stack.mcpUrl, { method: 'POST', headers: MCP_HEADERS, body: writeCall(1) });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(`${resourceMetadata()}, scope="${DEFAULT_DEV_SCOPE}"`);
    expectNoInternals(await response.text());
  });

  it('a browser client may read the headers that tell it what to do next (WWW-Authenticate, Retry-After)', async () => {
    // Neither is CORS-safelisted: unexposed, a browser client sees a 401 or 503 without knowing where to log in or
    // how long to wait.
    const response = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { ...MCP_HEADERS, Origin: 'http://localhost:6274' },
      body: writeCall(1),
    });
    expect(response.status).toBe(401);
    const exposed = (response.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    expect(exposed).toEqual(expect.arrayContaining(['www-authenticate', 'retry-after']));
  });

  it('a bad, foreign or expired token: 401 with error="invalid_token"', async () => {
    const expired = await stack.tokenFor('tenant-hygiene', { ttlSeconds: -120 });
    const [header, payload] = token.split('.');
    const tampered = `${header}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), tenant: 'someone-else' })).toString('base64url')}.${token.split('.')[2]}`;
    const unsigned = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${payload}.`;
    for (const bad of ['garbage', tampered, unsigned, expired]) {
      const response = await post(writeCall(1), { Authorization: `Bearer ${bad}` });
      expect(response.status).toBe(401);
      const challenge = response.headers.get('www-authenticate')!;
      expect(challenge.startsWith(resourceMetadata())).toBe(true);
      expect(challenge).toContain('error="invalid_token"');
    }
    const basic = await post(writeCall(1), { Authorization: 'Basic dXNlcjpwYXNz' });
    expect(basic.status).toBe(401);
    await expectStillServing();
  });

  it('a token without a valid tenant claim is refused', async () => {
    const issuer = await (await import('../../lambdas/auth/dev-issuer')).loadDevIssuer({
      dir: (stack.config.auth as { devAuthDir: string }).devAuthDir,
      issuer: stack.config.auth.issuer,
      audience: stack.config.auth.audience!,
      tenantClaim: 'not_the_tenant_claim',
    });
    const noTenant = await issuer.sign({ tenant: 'tenant-hygiene' });
    const response = await post(writeCall(1), { Authorization: `Bearer ${noTenant}` });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('serves the protected-resource metadata (RFC 9728) at both well-known locations, with its issuer and scopes', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const response = await fetch(`${stack.url}${path}`);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({
        resource: stack.mcpUrl,
        bearer_methods_supported: ['header'],
        authorization_servers: [DEV_ISSUER],
        scopes_supported: [DEFAULT_DEV_SCOPE],
      });
    }
  });

  it('keeps the metadata out of shared caches while it is derived from the Host header (PUBLIC_BASE_URL unset)', async () => {
    const path = '/.well-known/oauth-protected-resource';
    const request = { headers: { Host: 'attacker.example' } };
    const derived = await createApp(stack.services, { tools: [] }).request(`http://attacker.example${path}`, request);
    expect(await derived.json()).toMatchObject({ resource: 'http://attacker.example/mcp' });
    expect(derived.headers.get('cache-control')).not.toMatch(/public/);
    expect(derived.headers.get('cache-control')).toMatch(/private|no-store/);
    expect(derived.headers.get('vary')?.toLowerCase()).toContain('host');

    const services = { ...stack.services, config: { ...stack.services.config, publicBaseUrl: 'https://mcp.example' } };
    const fixed = await createApp(services, { tools: [] }).request(`http://attacker.example${path}`, request);
    expect(await fixed.json()).toMatchObject({ resource: 'https://mcp.example/mcp' });
    expect(fixed.headers.get('cache-control')).toMatch(/public/);
  });

  it('a token of the right issuer and key, but for another audience: 401 invalid_token, and nothing runs', async () => {
    const auth = stack.config.auth as Extract<typeof stack.config.auth, { mode: 'dev' }>;
    const { loadDevIssuer } = await import('../../lambdas/auth/dev-issuer');
    const otherApi = await loadDevIssuer({
      dir: auth.devAuthDir,
      issuer: auth.issuer,
      audience: 'another-api',
      tenantClaim: auth.tenantClaim,
    });
    const key = newKey();
    const response = await post(writeCall(1, key), { Authorization: `Bearer ${await otherApi.sign({ tenant: 'tenant-hygiene' })}` });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(ranUnder(key)).toBe(0);
    const body = (await (await post(writeCall(2, key))).json()) as { result: { structuredContent: { replayed: boolean } } };
    expect(body.result.structuredContent.replayed).toBe(false);
    expect(ranUnder(key)).toBe(1);
  });

  it('a valid token without the required scope: 403 insufficient_scope naming the scope, and nothing runs', async () => {
    const key = newKey();
    for (const scope of ['', 'something/else', `${DEFAULT_DEV_SCOPE}-not`]) {
      const unscoped = await stack.tokenFor('tenant-hygiene', { scope });
      const response = await post(writeCall(1, key), { Authorization: `Bearer ${unscoped}` });
      expect(response.status).toBe(403);
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer error="insufficient_scope", scope="${DEFAULT_DEV_SCOPE}", resource_metadata="${stack.url}/.well-known/oauth-protected-resource", ` +
          `error_description="the token lacks the scope this endpoint requires: ${DEFAULT_DEV_SCOPE}"`,
      );
      expectNoInternals(await response.text());
    }
    expect(ranUnder(key)).toBe(0);
    // The key was never claimed: the first call with the scope runs the operation.
    const scoped = await stack.tokenFor('tenant-hygiene', { scope: `openid ${DEFAULT_DEV_SCOPE}` });
    const response = await post(writeCall(2, key), { Authorization: `Bearer ${scoped}` });
    const body = (await response.json()) as { result: { structuredContent: { outcome: string; replayed: boolean } } };
    expect(body.result.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(ranUnder(key)).toBe(1);
  });
});
