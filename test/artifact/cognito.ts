import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

export interface AppClient {
  clientId: string;
  secret?: string;
  /** OAuth scopes the client may ask for (client credentials), or `openid` (people). */
  scopes: string[];
  callbackUrls: string[];
  flows: string[];
}

export interface Person {
  username: string;
  password: string;
  /** Custom attributes (`custom:tenant`). */
  attributes: Record<string, string>;
}

/**
 * Stands in for the stack's Cognito user pool and its domain, as the deployed functions and their callers see them:
 * the pool's JWKS under its provider URL, the domain's `/oauth2/token` (client credentials for app clients with a
 * secret; authorization code with PKCE S256 for the page's public client, answering an ID token with the person's
 * custom attributes) and `/oauth2/authorize` (a sign-in form for the pool's people). Tokens carry Cognito's claims
 * (`client_id`, `scope`, `token_use`); the clients, scopes and callback URLs are the template's.
 */
export class CognitoStandIn {
  readonly clients = new Map<string, AppClient>();
  readonly people = new Map<string, Person>();
  private readonly codes = new Map<string, { clientId: string; redirectUri: string; challenge: string; username: string }>();
  private keys?: { privateKey: CryptoKey; jwk: JWK };
  private server?: Server;
  url = '';
  poolId = '';

  async start() {
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    this.keys = { privateKey, jwk: { ...(await exportJWK(publicKey)), kid: randomUUID(), alg: 'RS256', use: 'sig' } };
    this.server = createServer((req, res) => {
      this.handle(req).then(
        ({ status, headers, body }) => res.writeHead(status, headers).end(body),
        (err: Error) => res.writeHead(500).end(err.message),
      );
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop() {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  get issuer() {
    return `${this.url}/${this.poolId}`;
  }

  private sign(claims: Record<string, unknown>, ttlSeconds = 3600) {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: this.keys!.jwk.kid! })
      .setIssuer(this.issuer)
      .setIssuedAt()
      .setExpirationTime(`${ttlSeconds}s`)
      .setJti(randomUUID())
      .sign(this.keys!.privateKey);
  }

  /** An access token by the client-credentials grant, as a machine gets one (what `npm run token` does deployed). */
  async clientCredentials(clientId: string, secret: string, scope: string): Promise<string> {
    const response = await fetch(`${this.url}/oauth2/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope }),
    });
    const answer = (await response.json()) as { access_token?: string; error?: string };
    if (!answer.access_token) throw new Error(`the token endpoint refused ${clientId}: ${answer.error}`);
    return answer.access_token;
  }

  private async handle(req: IncomingMessage): Promise<{ status: number; headers: Record<string, string>; body: string }> {
    const url = new URL(req.url ?? '/', this.url);
    const json = (status: number, value: unknown) => ({
      status,
      headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
      body: JSON.stringify(value),
    });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString());
    if (req.method === 'GET' && url.pathname === `/${this.poolId}/.well-known/jwks.json`) return json(200, { keys: [this.keys!.jwk] });
    if (req.method === 'GET' && url.pathname === '/oauth2/authorize') {
      const q = url.searchParams;
      const client = this.clients.get(q.get('client_id') ?? '');
      if (
        !client?.flows.includes('code') ||
        !client.callbackUrls.includes(q.get('redirect_uri') ?? '') ||
        q.get('response_type') !== 'code' ||
        q.get('code_challenge_method') !== 'S256'
      )
        return json(400, { error: 'invalid_request', client: q.get('client_id'), redirect_uri: q.get('redirect_uri') });
      const hidden = ['client_id', 'redirect_uri', 'state', 'code_challenge']
        .map((name) => `<input type="hidden" name="${name}" value="${q.get(name) ?? ''}">`)
        .join('');
      return {
        status: 200,
        headers: { 'content-type': 'text/html' },
        body: `<form method="post" action="/login">${hidden}<input name="username"><input name="password" type="password"></form>`,
      };
    }
    if (req.method === 'POST' && url.pathname === '/login') {
      const person = this.people.get(form.get('username') ?? '');
      const client = this.clients.get(form.get('client_id') ?? '');
      if (!person || person.password !== form.get('password') || !client || !client.callbackUrls.includes(form.get('redirect_uri') ?? ''))
        return json(400, { error: 'sign-in refused' });
      const code = randomBytes(16).toString('hex');
      this.codes.set(code, {
        clientId: client.clientId,
        redirectUri: form.get('redirect_uri')!,
        challenge: form.get('code_challenge') ?? '',
        username: person.username,
      });
      const back = new URL(form.get('redirect_uri')!);
      back.searchParams.set('code', code);
      back.searchParams.set('state', form.get('state') ?? '');
      return { status: 302, headers: { location: back.toString() }, body: '' };
    }
    if (req.method === 'POST' && url.pathname === '/oauth2/token') {
      if (form.get('grant_type') === 'client_credentials') {
        const [clientId, secret] = Buffer.from(String(req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64')
          .toString()
          .split(':');
        const client = this.clients.get(clientId ?? '');
        if (!client?.secret || client.secret !== secret || !client.flows.includes('client_credentials'))
          return json(400, { error: 'invalid_client' });
        const scope = (form.get('scope') ?? client.scopes.join(' ')).split(' ').filter(Boolean);
        if (scope.some((s) => !client.scopes.includes(s))) return json(400, { error: 'invalid_scope' });
        const token = await this.sign({
          sub: client.clientId,
          client_id: client.clientId,
          token_use: 'access',
          scope: scope.join(' '),
          version: 2,
          auth_time: Math.floor(Date.now() / 1000),
        });
        return json(200, { access_token: token, token_type: 'Bearer', expires_in: 3600 });
      }
      if (form.get('grant_type') === 'authorization_code') {
        const grant = this.codes.get(form.get('code') ?? '');
        this.codes.delete(form.get('code') ?? '');
        const verifier = form.get('code_verifier') ?? '';
        const challenge = createHash('sha256').update(verifier).digest('base64url');
        if (
          !grant ||
          grant.clientId !== form.get('client_id') ||
          grant.redirectUri !== form.get('redirect_uri') ||
          grant.challenge !== challenge
        )
          return json(400, { error: 'invalid_grant' });
        const person = this.people.get(grant.username)!;
        const idToken = await this.sign(
          { sub: randomUUID(), aud: grant.clientId, token_use: 'id', 'cognito:username': person.username, ...person.attributes },
          300,
        );
        return json(200, { id_token: idToken, access_token: idToken, token_type: 'Bearer', expires_in: 300 });
      }
      return json(400, { error: 'unsupported_grant_type' });
    }
    return json(404, { error: 'not found' });
  }
}
