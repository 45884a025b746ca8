import type { Context } from 'hono';
import { Hono } from 'hono/tiny';
import { html } from 'hono/html';
import { devIssuerFor } from '../auth/dev-issuer';
import type { AuthConfig } from '../config';
import { validateTenantId } from '../core/idempotency-key';
import type { Clock } from '../core/clock';
import { pageDocument, pageHeaders, pkceChallenge, randomToken, sameSecret } from './page-security';

/**
 * The local dev issuer's sign-in (`idempotent-mcp dev`, `npm start`, tests): an OAuth authorization endpoint that asks for a tenant and a
 * name instead of a password, marked as local on the page, and its token endpoint (authorization code with PKCE
 * S256) answering an ID token for the approval page's client. Mounted only when the endpoint trusts the dev issuer,
 * which is refused on Lambda (lambdas/config.ts).
 */
const CODE_SECONDS = 60;

interface Grant {
  tenant: string;
  subject: string;
  clientId: string;
  redirectUri: string;
  challenge: string;
  expiresAt: number;
}

/** A login hint that is a tenant id, or undefined. */
function tenantHint(value: string | undefined): string | undefined {
  try {
    return value === undefined ? undefined : validateTenantId(value);
  } catch {
    return undefined;
  }
}

/**
 * The approval page's sign-in on a local endpoint: signs a person in with the development issuer.
 */
export function createDevSignIn(auth: Extract<AuthConfig, { mode: 'dev' }>, clock: Clock): Hono {
  const codes = new Map<string, Grant>();
  const issuer = devIssuerFor(auth);
  const app = new Hono();
  app.use('/authorize', pageHeaders());

  const params = (source: Record<string, unknown>) => {
    const get = (name: string) => (typeof source[name] === 'string' ? (source[name] as string) : '');
    return {
      clientId: get('client_id'),
      redirectUri: get('redirect_uri'),
      state: get('state'),
      challenge: get('code_challenge'),
      method: get('code_challenge_method'),
      responseType: get('response_type'),
      scope: get('scope'),
    };
  };

  /** Only back to this server: the dev issuer signs in for the local endpoint and nothing else. */
  const redirectAllowed = (c: Context, uri: string) => {
    try {
      return new URL(uri).origin === new URL(c.req.url).origin;
    } catch {
      return false;
    }
  };

  const refuse = (c: Context, text: string) => c.html(pageDocument('Sign-in refused', html`<h1>Sign-in refused</h1><p>${text}</p>`), 400);

  app.get('/authorize', (c) => {
    const p = params(c.req.query());
    if (
      p.responseType !== 'code' ||
      p.method !== 'S256' ||
      !/^[A-Za-z0-9_-]{43}$/.test(p.challenge) ||
      !p.clientId ||
      !redirectAllowed(c, p.redirectUri)
    )
      return refuse(c, 'This sign-in request is not an authorization code request with PKCE (S256) for this server.');
    // The approval page names the approval's tenant (OIDC login_hint): the person is told what to type.
    const hint = tenantHint(c.req.query('login_hint'));
    return c.html(
      pageDocument(
        'Local sign-in',
        html`<p class="banner" id="local-banner">Local development sign-in (idempotent-mcp dev, npm start): no password, not a real identity provider. Deployed, the person signs in at the stack's Cognito managed login or your issuer.</p>
<h1>Sign in</h1>
${
  hint
    ? html`<p id="tenant-hint">This approval belongs to tenant <strong>${hint}</strong>, filled in below: type your name and sign in.</p>`
    : html`<p class="hint" id="tenant-hint">Type the tenant the agent's token was made for (the one the start banner printed a token for).</p>`
}
<form method="post">
<input type="hidden" name="client_id" value="${p.clientId}">
<input type="hidden" name="redirect_uri" value="${p.redirectUri}">
<input type="hidden" name="state" value="${p.state}">
<input type="hidden" name="code_challenge" value="${p.challenge}">
<label for="tenant">Tenant</label><input id="tenant" name="tenant" required autocomplete="organization" value="${hint ?? ''}">
<label for="name">Your name</label><input id="name" name="name" required autocomplete="username">
<p><button class="approve" type="submit" id="sign-in">Sign in</button></p>
</form>`,
      ),
    );
  });

  app.post('/authorize', async (c) => {
    const form = await c.req.parseBody();
    const p = params(form);
    if (!/^[A-Za-z0-9_-]{43}$/.test(p.challenge) || !p.clientId || !redirectAllowed(c, p.redirectUri))
      return refuse(c, 'This sign-in request is incomplete.');
    let tenant: string;
    try {
      tenant = validateTenantId(typeof form.tenant === 'string' ? form.tenant.trim() : '');
    } catch (err) {
      return refuse(c, (err as Error).message);
    }
    const name = typeof form.name === 'string' ? form.name.trim().slice(0, 64) : '';
    if (!/^[A-Za-z0-9._@-]{1,64}$/.test(name)) return refuse(c, 'Your name: letters, digits and . _ @ - only.');
    const code = randomToken();
    codes.set(code, {
      tenant,
      subject: `${name}@${tenant}`,
      clientId: p.clientId,
      redirectUri: p.redirectUri,
      challenge: p.challenge,
      expiresAt: clock() + CODE_SECONDS * 1000,
    });
    const back = new URL(p.redirectUri);
    back.searchParams.set('code', code);
    back.searchParams.set('state', p.state);
    return c.redirect(back.toString(), 303);
  });

  app.post('/token', async (c) => {
    const form = await c.req.parseBody();
    const code = typeof form.code === 'string' ? form.code : '';
    const grant = codes.get(code);
    // A code is used once, whatever the outcome.
    codes.delete(code);
    const verifier = typeof form.code_verifier === 'string' ? form.code_verifier : '';
    if (
      form.grant_type !== 'authorization_code' ||
      !grant ||
      grant.expiresAt <= clock() ||
      form.client_id !== grant.clientId ||
      form.redirect_uri !== grant.redirectUri ||
      !sameSecret(pkceChallenge(verifier), grant.challenge)
    )
      return c.json({ error: 'invalid_grant' }, 400);
    const idToken = await (await issuer).sign({
      tenant: grant.tenant,
      subject: grant.subject,
      audience: grant.clientId,
      scope: '',
      ttlSeconds: 300,
      extra: { token_use: 'id' },
    });
    c.header('Cache-Control', 'no-store');
    return c.json({ id_token: idToken, token_type: 'Bearer', expires_in: 300 });
  });

  return app;
}
