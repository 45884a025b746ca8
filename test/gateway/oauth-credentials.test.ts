import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { jwtVerify, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  contract,
  newKey,
  sdkClient,
  startEverythingGateway,
  type EverythingGateway,
  type HttpRelay,
  type RelayAnswer,
  type TestGateway,
} from './support';

/**
 * A tenant whose upstream credential is `oauthClientCredentials`: the gateway gets a token from a real token endpoint
 * (an authorization server of the test's own, on 127.0.0.1, issuing JWTs) by the client-credentials grant, and the
 * upstream (server-everything behind the relay, which here acts as the resource server: 401 + WWW-Authenticate and
 * its protected-resource metadata) receives only that token.
 */
const policy = { tools: { echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000 }, 'get-sum': { kind: 'read' } } };
const CLIENT_ID = 'gateway-client';
const CLIENT_SECRET = 'the-right-secret';
/** A client the token endpoint never answers (held until the test ends): a token endpoint that hangs. */
const STUCK_CLIENT_ID = 'stuck-client';

interface TokenRequest {
  clientId?: string;
  grantType: string | null;
  resource: string | null;
  answer: 'token' | 'invalid_client';
}

let as: Server;
let issuer: string;
const signingKey = randomBytes(32);
const issued = new Set<string>();
const tokenRequests: TokenRequest[] = [];
/** Every request of the OAuth discovery: the authorization server's metadata and the resource's metadata. */
let discoveries = 0;
const heldTokenRequests: Array<import('node:http').ServerResponse> = [];
/** tools/call requests the relay refused itself (no valid token): what the gateway tried to send without one. */
const refusedCalls: string[] = [];
let setup: EverythingGateway;
let relay: HttpRelay;
let gateway: TestGateway;

/** The smallest authorization server: RFC 8414 metadata and a token endpoint for client_credentials (client_secret_basic). */
async function startAuthorizationServer(): Promise<void> {
  as = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.method === 'GET' && req.url?.startsWith('/.well-known/')) discoveries++;
      if (req.method === 'GET' && req.url === '/.well-known/oauth-authorization-server')
        return json(200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          response_types_supported: ['code'],
          grant_types_supported: ['client_credentials'],
          token_endpoint_auth_methods_supported: ['client_secret_basic'],
        });
      if (req.method !== 'POST' || req.url !== '/token') return json(404, { error: 'not_found' });
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const [scheme, encoded] = (req.headers.authorization ?? '').split(' ');
      const [id, secret] =
        scheme === 'Basic' && encoded ? Buffer.from(encoded, 'base64').toString('utf8').split(':').map(decodeURIComponent) : [];
      const request: TokenRequest = {
        clientId: id,
        grantType: form.get('grant_type'),
        resource: form.get('resource'),
        answer: 'invalid_client',
      };
      tokenRequests.push(request);
      if (id === STUCK_CLIENT_ID) return void heldTokenRequests.push(res);
      if (id !== CLIENT_ID || secret !== CLIENT_SECRET)
        return json(401, { error: 'invalid_client', error_description: 'client authentication failed' });
      if (request.grantType !== 'client_credentials') return json(400, { error: 'unsupported_grant_type' });
      const token = await new SignJWT({ scope: form.get('scope') ?? undefined })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuer(issuer)
        .setSubject(id)
        .setAudience(request.resource ?? 'none')
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(signingKey);
      request.answer = 'token';
      issued.add(token);
      return json(200, { access_token: token, token_type: 'Bearer', expires_in: 600 });
    });
  });
  await new Promise<void>((resolve) => as.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(as.address() as { port: number }).port}`;
}

beforeAll(async () => {
  await startAuthorizationServer();
  const metadataPath = '/.well-known/oauth-protected-resource/mcp';
  setup = await startEverythingGateway({
    policy,
    credentials: {
      tenants: {
        demo: { oauthClientCredentials: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, issuer } },
        wrong: { oauthClientCredentials: { clientId: CLIENT_ID, clientSecret: 'not-the-secret', issuer } },
        // A static token the resource server does not accept (one the vendor revoked, say).
        revoked: { header: { name: 'Authorization', value: 'Bearer revoked-static-token' } },
        stuck: { oauthClientCredentials: { clientId: STUCK_CLIENT_ID, clientSecret: CLIENT_SECRET, issuer } },
        // Registered with another authorization server than the one the upstream names.
        elsewhere: {
          oauthClientCredentials: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, issuer: 'https://auth.elsewhere.example' },
        },
      },
    },
    guard: async (req, body, resource): Promise<RelayAnswer | undefined> => {
      if (req.method === 'GET' && req.url === metadataPath) {
        discoveries++;
        return {
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ resource, authorization_servers: [issuer] }),
        };
      }
      const [scheme, token] = (req.headers.authorization ?? '').split(' ');
      if (scheme === 'Bearer' && token) {
        const verified = await jwtVerify(token, signingKey, { issuer, audience: resource }).catch(() => undefined);
        if (verified) return undefined;
      }
      try {
        for (const message of [JSON.parse(body.toString('utf8') || 'null')].flat())
          if (message?.method === 'tools/call') refusedCalls.push(String(message.params?.arguments?.message));
      } catch {
        // not JSON
      }
      return { status: 401, headers: { 'www-authenticate': `Bearer resource_metadata="${new URL(metadataPath, resource)}"` }, body: '' };
    },
  });
  ({ relay, gateway } = setup);
});
afterAll(async () => {
  for (const held of heldTokenRequests) held.destroy();
  await setup?.stop();
  await new Promise((resolve) => as?.close(resolve));
  as?.closeAllConnections();
});

const echoes = (message: string) => setup.echoes(message);

describe('gateway upstream credential: OAuth client credentials', () => {
  it('gets a token by the client-credentials grant and the upstream receives that token, never the agent’s', async () => {
    const agentToken = await gateway.tokenFor('demo');
    const client = await sdkClient(gateway, 'demo');
    const message = `oauth ${newKey()}`;
    const key = newKey();
    let outcome = '';
    for (let attempt = 0; attempt < 60 && outcome !== 'succeeded'; attempt++) {
      outcome = contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } })).outcome;
      if (outcome !== 'succeeded') await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await client.close();
    expect(outcome).toBe('succeeded');

    const granted = tokenRequests.filter((request) => request.answer === 'token');
    expect(granted.length).toBeGreaterThan(0);
    expect(
      granted.every(
        (request) => request.clientId === CLIENT_ID && request.grantType === 'client_credentials' && request.resource === relay.url,
      ),
    ).toBe(true);
    const calls = echoes(message);
    expect(calls).toHaveLength(1);
    const [scheme, token] = (calls[0]!.authorization ?? '').split(' ');
    expect(scheme).toBe('Bearer');
    expect(issued.has(token!)).toBe(true);
    for (const seen of relay.authorizations) {
      expect(issued.has(seen.replace(/^Bearer /, ''))).toBe(true);
      expect(seen).not.toContain(agentToken);
    }
  });

  it('a wrong client secret fails the call, and nothing is sent to the upstream’s tools/call', async () => {
    const before = tokenRequests.length;
    const client = await sdkClient(gateway, 'wrong');
    const message = `wrong secret ${newKey()}`;
    const key = newKey();
    const answer = contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } }));
    // Final, naming the cause: a retry would send the same secret to the same refusal.
    expect(answer).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'UPSTREAM_CREDENTIAL_REFUSED' } });
    expect(answer.error!.message).toMatch(
      /^The gateway's upstream credential was refused: the authorization server answered invalid_client \(client authentication failed\) \(tenant wrong\); nothing was sent\./,
    );
    expect(answer.error!.message).not.toContain('not-the-secret');
    // The token endpoint refused the secret; no token was issued for it.
    const attempts = tokenRequests.slice(before);
    expect(attempts.length).toBeGreaterThan(0);
    expect(attempts.every((request) => request.answer === 'invalid_client')).toBe(true);
    // The same key again: the recorded answer, without asking the token endpoint again.
    const asked = tokenRequests.length;
    expect(contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } }))).toMatchObject({
      outcome: 'failed',
      replayed: true,
      retryable: false,
      error: { code: 'UPSTREAM_CREDENTIAL_REFUSED' },
    });
    expect(tokenRequests.length).toBe(asked);
    // A read is refused the same way, as a read error that says calling again will not help.
    const read = (await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })) as {
      isError?: boolean;
      content: Array<{ text: string }>;
    };
    await client.close();
    expect(read.isError).toBe(true);
    expect(read.content[0]!.text).toMatch(
      /^UPSTREAM_CREDENTIAL_REFUSED: The gateway's upstream credential was refused: the authorization server answered invalid_client/,
    );
    expect(echoes(message)).toHaveLength(0);
    expect(refusedCalls).not.toContain(message);

    // Another write of the tenant, with a new key: answered from the refusal the gateway remembers, with neither a
    // new discovery nor a new token request (each failed call starting OAuth over would hammer the servers).
    const discovered = discoveries;
    const again = await sdkClient(gateway, 'wrong');
    for (let i = 0; i < 3; i++)
      expect(
        contract(await again.callTool({ name: 'echo', arguments: { message: `${message} ${i}`, idempotency_key: newKey() } })),
      ).toMatchObject({
        outcome: 'failed',
        retryable: false,
        error: { code: 'UPSTREAM_CREDENTIAL_REFUSED' },
      });
    await again.close();
    expect({ discoveries, tokenRequests: tokenRequests.length }).toEqual({ discoveries: discovered, tokenRequests: asked });
  });

  it('a token endpoint that never answers: the write answers not sent, retryable, its key free; nothing is parked or sent', async () => {
    const client = await sdkClient(gateway, 'stuck');
    const message = `stuck ${newKey()}`;
    const key = newKey();
    const answer = contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: key } }));
    expect(answer).toMatchObject({ outcome: 'failed', retryable: true, error: { code: 'UPSTREAM_UNAVAILABLE' } });
    expect(answer.error!.message).toMatch(/nothing was sent\. Call again with the same key\./);
    expect(heldTokenRequests.length).toBeGreaterThan(0);
    // The key is free: no record holds it (neither unknown nor parked for a person).
    const status = (await client.callTool({ name: 'get_operation_status', arguments: { tool: 'echo', idempotency_key: key } })) as {
      structuredContent: { status: string };
    };
    await client.close();
    expect(status.structuredContent.status).toBe('not_found');
    expect(echoes(message)).toHaveLength(0);
    expect(refusedCalls).not.toContain(message);
  });

  it('a credential registered with another authorization server is refused as final; it is never sent there', async () => {
    const before = tokenRequests.length;
    const client = await sdkClient(gateway, 'elsewhere');
    const message = `elsewhere ${newKey()}`;
    const answer = contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: newKey() } }));
    await client.close();
    expect(answer).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'UPSTREAM_CREDENTIAL_REFUSED' } });
    expect(answer.error!.message).toContain('https://auth.elsewhere.example');
    expect(tokenRequests.length).toBe(before);
    expect(echoes(message)).toHaveLength(0);
  });

  it('a header credential the upstream answers 401 to is refused as final, naming the cause; nothing is sent', async () => {
    const client = await sdkClient(gateway, 'revoked');
    const message = `revoked ${newKey()}`;
    const answer = contract(await client.callTool({ name: 'echo', arguments: { message, idempotency_key: newKey() } }));
    await client.close();
    expect(answer).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'UPSTREAM_CREDENTIAL_REFUSED' } });
    expect(answer.error!.message).toMatch(
      /^The gateway's upstream credential was refused: the upstream answered (401 Unauthorized|HTTP 401)/,
    );
    expect(answer.error!.message).not.toContain('revoked-static-token');
    expect(echoes(message)).toHaveLength(0);
    expect(refusedCalls).not.toContain(message);
  });
});
