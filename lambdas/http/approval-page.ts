import type { Context } from 'hono';
import { Hono } from 'hono/tiny';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { type ApprovalRecord, parseApprovalId } from '../confirmation/core/approval';
import type { ApprovalStore } from '../confirmation/approval-store';
import { AuthenticationError, createTokenVerifier, type TokenVerifier } from '../auth/verifier';
import type { AppConfig, ApprovalPageConfig } from '../config';
import type { Clock } from '../core/clock';
import { whenText } from '../core/when';
import type { ToolRuntime } from '../mcp/tool-types';
import { APPROVAL_CALLBACK_PATH, APPROVALS_PATH } from '../core/endpoint-paths';
import {
  APPROVAL_ICON_PATH,
  openSealed,
  pageBase,
  pageDocument,
  pageHeaders,
  pkceChallenge,
  randomToken,
  sameSecret,
  sealValue,
} from './page-security';

/**
 * The approval page: `GET /approvals/<id>` shows what the person approves (tool, summary, tenant, expiry) once they
 * are signed in, `POST /approvals/<id>` records their decision, once. Sign-in is the OAuth authorization code flow
 * with PKCE at the page's own client (Cognito managed login, an external issuer, or locally the dev issuer's page):
 * the session comes only from an ID token whose audience is that client, so an agent's bearer token (another
 * audience, and never looked at here) cannot decide. Only a person of the approval's tenant sees or decides it.
 */
export interface ApprovalPageServices {
  config: Pick<AppConfig, 'auth' | 'publicBaseUrl'> & { approvals: Pick<ApprovalPageConfig, 'baseUrl' | 'signIn'> };
  approvals: ApprovalStore;
  signingSecret: () => Promise<string>;
  clock: Clock;
  logger: Pick<ToolRuntime['logger'], 'info' | 'warn'>;
  /**
   * Answers a relative token URL (the local dev issuer's, a route of the same app) in-process. Without it the token
   * URL must be absolute: the code and its verifier go only where configuration says, never to a host a request names.
   */
  localRoutes?: (request: Request) => Response | Promise<Response>;
}

/** Where the sign-in's code is exchanged: the configured token URL, or this app's own route, in-process. */
function tokenEndpoint(tokenUrl: string, localRoutes: ApprovalPageServices['localRoutes']): (init: RequestInit) => Promise<Response> {
  if (/^https?:\/\//i.test(tokenUrl)) return (init) => fetch(tokenUrl, init);
  if (!tokenUrl.startsWith('/') || !localRoutes)
    throw new Error(
      `the approval page's token URL must be the issuer's absolute http(s) URL (APPROVAL_TOKEN_URL), got ${JSON.stringify(tokenUrl)}`,
    );
  // The host is never looked at: the request goes to this app's router, not to the network.
  return async (init) => localRoutes(new Request(new URL(tokenUrl, 'http://localhost'), init));
}

const SESSION_SECONDS = 15 * 60;
const SIGN_IN_SECONDS = 10 * 60;
const PURPOSE = { session: 'approval-session-v1', signIn: 'approval-sign-in-v1', csrf: 'approval-csrf-v1' } as const;
/** The route under APPROVALS_PATH that the issuer sends the person back to. */
const CALLBACK = APPROVAL_CALLBACK_PATH.slice(APPROVALS_PATH.length);
/** Where a signed-in person signs out (a person of another tenant, to sign in as one of the approval's). */
const SIGN_OUT = '/sign-out';

interface Session {
  tenant: string;
  subject: string;
}
interface SignIn {
  verifier: string;
  state: string;
  returnTo: string;
}

/** `__Host-` cookies (https only): bound to this host and path /, never set by a sibling domain. */
const cookieName = (secure: boolean, name: string) => (secure ? `__Host-${name}` : name);

export function createApprovalPage(services: ApprovalPageServices): Hono {
  const signIn = services.config.approvals.signIn;
  if (!signIn)
    throw new Error('the approval page needs its sign-in settings (APPROVAL_CLIENT_ID, APPROVAL_AUTHORIZE_URL, APPROVAL_TOKEN_URL)');
  // ID tokens of the page's own client only: its client id is their audience (and their azp when they name several);
  // no scope is asked of them.
  // A person's tenant may sit in a claim of its own (the stack's pool: the custom attribute custom:tenant).
  const idTokens: TokenVerifier = createTokenVerifier(
    {
      ...services.config.auth,
      audience: signIn.clientId,
      requiredScopes: [],
      tenantClaim: signIn.tenantClaim ?? services.config.auth.tenantClaim,
    },
    { authorizedParty: signIn.clientId },
  );
  const exchangeCode = tokenEndpoint(signIn.tokenUrl, services.localRoutes);
  const app = new Hono();
  app.use('*', pageHeaders());

  const base = (c: Context) => pageBase(c, services.config.approvals.baseUrl ?? services.config.publicBaseUrl);
  const secure = (c: Context) => base(c).startsWith('https:');
  const now = () => services.clock();

  async function sessionOf(c: Context): Promise<Session | undefined> {
    return openSealed<Session>(
      await services.signingSecret(),
      PURPOSE.session,
      getCookie(c, cookieName(secure(c), 'approval_session')),
      now(),
    );
  }

  async function csrfFor(session: Session, approvalId: string): Promise<string> {
    return sealValue(
      await services.signingSecret(),
      PURPOSE.csrf,
      { t: session.tenant, s: session.subject, a: approvalId },
      now() + SESSION_SECONDS * 1000,
    );
  }

  async function startSignIn(c: Context, returnTo: string, tenant: string) {
    const verifier = randomToken();
    const state = randomToken(16);
    const sealed = sealValue(
      await services.signingSecret(),
      PURPOSE.signIn,
      { verifier, state, returnTo } satisfies SignIn,
      now() + SIGN_IN_SECONDS * 1000,
    );
    // Lax: the issuer sends the person back with a top-level GET, which carries it.
    setCookie(c, cookieName(secure(c), 'approval_sign_in'), sealed, {
      path: '/',
      httpOnly: true,
      secure: secure(c),
      sameSite: 'Lax',
      maxAge: SIGN_IN_SECONDS,
    });
    const authorize = new URL(signIn!.authorizeUrl, base(c));
    authorize.search = new URLSearchParams({
      response_type: 'code',
      client_id: signIn!.clientId,
      redirect_uri: `${base(c)}${APPROVAL_CALLBACK_PATH}`,
      scope: signIn!.scopes.join(' '),
      state,
      code_challenge: pkceChallenge(verifier),
      code_challenge_method: 'S256',
      ...(signIn!.tenantHint ? { login_hint: tenant } : {}),
    }).toString();
    return c.redirect(authorize.toString(), 302);
  }

  const message = (
    c: Context,
    status: 200 | 400 | 401 | 403 | 404 | 409 | 410 | 502,
    title: string,
    text: string,
    more: HtmlEscapedString | Promise<HtmlEscapedString> | string = '',
  ) => c.html(pageDocument(title, html`<h1>${title}</h1><p>${text}</p>${more}`), status);

  /** Signs out, then back to the approval: the person signs in again (as someone else, of the approval's tenant). */
  const signOutForm = (approvalId: string) =>
    html`<form class="sign-out" method="post" action="${APPROVALS_PATH}${SIGN_OUT}"><input type="hidden" name="return" value="${approvalId}"><button type="submit" id="sign-out">Sign out</button></form>`;

  /** A browser always sends Origin on a POST: one from another site is refused before anything is read. */
  const foreignPost = (c: Context) => {
    const origin = c.req.header('origin');
    return origin !== undefined && origin !== new URL(base(c)).origin;
  };

  app.post(SIGN_OUT, async (c) => {
    if (foreignPost(c)) return message(c, 403, 'Refused', 'This form was not sent from the approval page.');
    deleteCookie(c, cookieName(secure(c), 'approval_session'), { path: '/', secure: secure(c) });
    const form = await c.req.parseBody();
    const back = typeof form.return === 'string' && parseApprovalId(form.return) ? `${APPROVALS_PATH}/${form.return}` : undefined;
    if (!back) return message(c, 200, 'Signed out', 'You are signed out. Open the approval link again to sign in.');
    return c.redirect(back, 303);
  });

  app.get(CALLBACK, async (c) => {
    const name = cookieName(secure(c), 'approval_sign_in');
    const pending = openSealed<SignIn>(await services.signingSecret(), PURPOSE.signIn, getCookie(c, name), now());
    deleteCookie(c, name, { path: '/', secure: secure(c) });
    const code = c.req.query('code');
    const state = c.req.query('state');
    if (!pending || !code || !state || !sameSecret(state, pending.state))
      return message(
        c,
        400,
        'Sign-in did not complete',
        'This sign-in was not started here or took too long. Open the approval link again.',
      );
    let idToken: string | undefined;
    try {
      const response = await exchangeCode({
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: `${base(c)}${APPROVAL_CALLBACK_PATH}`,
          client_id: signIn.clientId,
          code_verifier: pending.verifier,
        }),
        signal: AbortSignal.timeout(5000),
      });
      if (response.ok) idToken = ((await response.json()) as { id_token?: unknown }).id_token as string | undefined;
      else services.logger.warn('approval sign-in: the token endpoint refused the code', { status: response.status });
    } catch (err) {
      services.logger.warn('approval sign-in: the token endpoint could not be reached', { error_name: (err as Error).name });
      return message(c, 502, 'Sign-in is unavailable', 'The sign-in service could not be reached. Try the approval link again shortly.');
    }
    if (typeof idToken !== 'string')
      return message(c, 401, 'Sign-in did not complete', 'The sign-in service did not confirm who you are. Open the approval link again.');
    let session: Session;
    try {
      const caller = await idTokens.verify(`Bearer ${idToken}`);
      session = { tenant: caller.tenant, subject: caller.subject };
    } catch (err) {
      if (!(err instanceof AuthenticationError)) throw err;
      return message(c, 401, 'Sign-in did not complete', 'Your sign-in could not be verified for this page. Open the approval link again.');
    }
    setCookie(
      c,
      cookieName(secure(c), 'approval_session'),
      sealValue(await services.signingSecret(), PURPOSE.session, { ...session }, now() + SESSION_SECONDS * 1000),
      {
        path: '/',
        httpOnly: true,
        secure: secure(c),
        sameSite: 'Lax',
        maxAge: SESSION_SECONDS,
      },
    );
    return c.redirect(pending.returnTo.startsWith('/approvals/') ? pending.returnTo : '/approvals/', 303);
  });

  /** The approval the link names, for a signed-in person of its tenant; otherwise the answer to send. */
  async function load(c: Context, id: string): Promise<{ session: Session; record: ApprovalRecord } | Response> {
    const named = parseApprovalId(id);
    if (!named) return message(c, 404, 'No such approval', 'This link does not name an approval.');
    const session = await sessionOf(c);
    if (!session)
      return c.req.method === 'GET'
        ? startSignIn(c, `/approvals/${id}`, named.tenant)
        : message(c, 401, 'Sign in first', 'Open the approval link to sign in, then decide.');
    if (session.tenant !== named.tenant) {
      services.logger.warn('approval page: a person of another tenant opened an approval', { tenant: session.tenant });
      return message(
        c,
        403,
        'Not yours to decide',
        `You are signed in as ${session.subject} for tenant ${session.tenant}; this approval belongs to another tenant. Sign out to sign in as a person of that tenant.`,
        signOutForm(id),
      );
    }
    const record = await services.approvals.current(named);
    // A round asked in the client's form is not the page's to show or decide.
    if (!record || !sameSecret(record.nonce, named.nonce) || record.mode !== 'url')
      return message(
        c,
        404,
        'This link is no longer valid',
        'It was replaced by a newer request or has expired; nothing was done. The agent gets a new link when it tries again.',
      );
    return { session, record };
  }

  /** Once approved: whether a run used the yes, when and which (a yes authorizes one run). */
  const used = (record: ApprovalRecord, at: number) =>
    record.status !== 'approved'
      ? ''
      : record.usedAt === undefined
        ? html`<dt>Used</dt><dd id="used">not yet: the agent's next call with the same key runs it, once</dd>`
        : html`<dt>Used</dt><dd id="used">${whenText(record.usedAt, at)} by run <code>${record.usedBy}</code></dd>`;

  function view(record: ApprovalRecord, session: Session, csrf: string | undefined, notice?: string) {
    const at = now();
    const expired = record.status === 'pending' && at >= record.expiresAt;
    // The heading says where the approval stands: a question only while it can still be answered.
    const [heading, state] =
      record.status === 'approved'
        ? [
            'Approved',
            `Approved by ${record.decidedBy} at ${whenText(record.decidedAt!, at)}. The agent can continue; this cannot be undone here.`,
          ]
        : record.status === 'declined'
          ? ['Declined', `Declined by ${record.decidedBy} at ${whenText(record.decidedAt!, at)}. Nothing was done.`]
          : expired
            ? ['This link has expired', 'This link has expired; nothing was done. The agent gets a new link when it tries again.']
            : ['Approve this operation?', undefined];
    return pageDocument(
      heading,
      html`<h1>${heading}</h1>
<p class="summary" id="summary">${record.summary}</p>
<dl>
<dt>Tool</dt><dd id="tool">${record.tool}</dd>
<dt>Tenant</dt><dd id="tenant">${record.tenant}</dd>
<dt>Signed in as</dt><dd><span id="subject">${session.subject}</span> ${signOutForm(record.id)}</dd>
${
  record.status === 'pending'
    ? html`<dt>${expired ? 'Link expired' : 'Link expires'}</dt><dd id="expires">${whenText(record.expiresAt, at)}</dd>`
    : html`<dt>Decided</dt><dd id="decided">${whenText(record.decidedAt!, at)}</dd>${used(record, at)}`
}
</dl>
${notice ? html`<p class="state" id="notice">${notice}</p>` : ''}
${
  state
    ? html`<p class="state" id="state">${state}</p>`
    : html`<form class="decide" method="post">
<input type="hidden" name="csrf" value="${csrf}">
<button class="approve" type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="decline">Decline</button>
</form>`
}`,
    );
  }

  // The pages' icon (pageDocument names it): no content, so a browser shows its default and logs no error.
  app.get(APPROVAL_ICON_PATH.slice(APPROVALS_PATH.length), (c) => c.body(null, 204));

  // The page's own URL (the stack's ApprovalPageUrl output): each approval has a link of its own under it.
  app.get('/', (c) =>
    c.html(
      pageDocument(
        'Approvals',
        html`<h1>Approvals</h1><p>Each operation waiting for a person has a link of its own under this address (<code>${base(c)}${APPROVALS_PATH}/&lt;id&gt;</code>): open the link the agent gave you, sign in, and approve or decline it there.</p>`,
      ),
    ),
  );

  app.get('/:id', async (c) => {
    const loaded = await load(c, c.req.param('id'));
    if (loaded instanceof Response) return loaded;
    return c.html(view(loaded.record, loaded.session, await csrfFor(loaded.session, loaded.record.id)));
  });

  app.post('/:id', async (c) => {
    const id = c.req.param('id');
    if (foreignPost(c)) return message(c, 403, 'Refused', 'This form was not sent from the approval page.');
    const loaded = await load(c, id);
    if (loaded instanceof Response) return loaded;
    const { session, record } = loaded;
    const form = await c.req.parseBody();
    const csrf = typeof form.csrf === 'string' ? form.csrf : undefined;
    const token = openSealed<{ t: string; s: string; a: string }>(await services.signingSecret(), PURPOSE.csrf, csrf, now());
    if (!token || token.t !== session.tenant || token.s !== session.subject || token.a !== record.id)
      return message(c, 403, 'Refused', 'The form is missing its protection token or is out of date. Open the approval link again.');
    const decision = form.decision === 'approve' ? 'approved' : form.decision === 'decline' ? 'declined' : undefined;
    if (!decision) return message(c, 400, 'Choose', 'Choose Approve or Decline.');
    const result = await services.approvals.decide(record, { status: decision, by: session.subject, at: now(), via: 'url' });
    if (!result.applied && result.reason === 'unknown')
      return message(c, 404, 'This link is no longer valid', 'It was replaced by a newer request; nothing was done.');
    services.logger.info('approval decided', { tenant: record.tenant, tool: record.tool, decision, applied: result.applied });
    const notice = result.applied
      ? undefined
      : result.reason === 'decided'
        ? 'This approval was already decided; the first decision stands.'
        : undefined;
    return c.html(view(result.record, session, undefined, notice), result.applied ? 200 : 409);
  });

  return app;
}
