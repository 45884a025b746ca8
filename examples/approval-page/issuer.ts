/**
 * A stand-in for your OpenID Connect issuer (Cognito, Entra ID, Okta, Keycloak...), so the example runs offline: an
 * authorization endpoint that signs in whoever `signInAs` names (no password: this is no identity provider), a token
 * endpoint (authorization code with PKCE S256) answering an RS256 ID token, and its key set. Use your real issuer.
 */
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { approvalPage } from 'idempotent-mcp/mcp';

export interface Person {
  sub: string;
  tenant: string;
}

export interface StandInIssuer {
  /** The page's sign-in settings for this issuer. */
  signIn: Parameters<typeof approvalPage>[0]['signIn'];
  /** Who the next sign-in is. */
  signInAs(person: Person): void;
  stop(): Promise<void>;
}

const base64url = (value: Buffer | string) => Buffer.from(value).toString('base64url');

export async function startStandInIssuer(clientId = 'approval-page'): Promise<StandInIssuer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = randomBytes(8).toString('hex');
  const codes = new Map<string, Person & { challenge: string; redirectUri: string }>();
  let person: Person | undefined;
  let issuer = '';

  const idToken = (who: Person) => {
    const now = Math.floor(Date.now() / 1000);
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid }));
    const claims = base64url(
      JSON.stringify({ iss: issuer, aud: clientId, sub: who.sub, 'custom:tenant': who.tenant, iat: now, exp: now + 300 }),
    );
    return `${header}.${claims}.${base64url(sign('sha256', Buffer.from(`${header}.${claims}`), privateKey))}`;
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    if (req.method === 'GET' && url.pathname === '/jwks') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' }] }));
    }
    if (req.method === 'GET' && url.pathname === '/authorize') {
      const q = url.searchParams;
      if (!person || q.get('client_id') !== clientId || q.get('code_challenge_method') !== 'S256') return res.writeHead(400).end();
      const code = randomBytes(24).toString('base64url');
      codes.set(code, { ...person, challenge: q.get('code_challenge')!, redirectUri: q.get('redirect_uri')! });
      const back = new URL(q.get('redirect_uri')!);
      back.search = new URLSearchParams({ code, state: q.get('state') ?? '' }).toString();
      return res.writeHead(302, { Location: back.toString() }).end();
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const form = new URLSearchParams(body);
      const grant = codes.get(form.get('code') ?? '');
      codes.delete(form.get('code') ?? '');
      const verifier = form.get('code_verifier') ?? '';
      if (
        !grant ||
        grant.redirectUri !== form.get('redirect_uri') ||
        createHash('sha256').update(verifier).digest('base64url') !== grant.challenge
      )
        return res.writeHead(400, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant' }));
      res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      return res.end(JSON.stringify({ id_token: idToken(grant), token_type: 'Bearer', expires_in: 300 }));
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    signIn: {
      issuer,
      jwksUrl: `${issuer}/jwks`,
      clientId,
      authorizeUrl: `${issuer}/authorize`,
      tokenUrl: `${issuer}/token`,
      tenantClaim: 'custom:tenant',
    },
    signInAs: (who) => {
      person = who;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
