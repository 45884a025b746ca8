import { Hono } from 'hono/tiny';
import { systemClock, type Clock } from '../core/clock';
import { MIN_SECRET_LENGTH } from '../config';
import type { ApprovalStore } from '../confirmation/approval-store';
import { APPROVALS_PATH } from '../core/endpoint-paths';
import { stderrLogger } from '../observability/logger';
import { createApprovalPage } from './approval-page';

/**
 * The approval page of a team's own server, for its `confirmation: 'approval'` tools: `GET /approvals/<id>` shows a
 * signed-in person of the approval's tenant what they approve, `POST` records their decision, once. A web-standard
 * handler (`page.fetch(request)`) for requests under `/approvals/`: on `@hono/node-server` or any fetch-based server
 * route them to it; on Lambda, `handle(page)` of `hono/aws-lambda`; in a Hono app, `app.route('/', page)`. The same
 * page the endpoint serves, with your issuer's settings instead of the endpoint's environment. It needs the approval
 * store, the signing secret, its base URL and how it signs a person in; optionally the clock and the logger.
 * @public
 */
export function approvalPage(options: {
  /** Where the approvals live: the same store as the tool runtime's `approvals` (DynamoDbApprovalStore). */
  approvals: ApprovalStore;
  /**
   * The key of the page's cookies (session, sign-in, form token), at least 32 characters, or how to read it. The tool
   * runtime's secret will do: each use of the key is domain-separated.
   */
  secret: string | (() => Promise<string>);
  /**
   * The page's public origin, e.g. `https://pay.example.com`: the person's browser reaches the page there, the issuer
   * sends them back to `<baseUrl>/approvals/callback`, and the tool runtime's `publicBaseUrl` names it in the links.
   */
  baseUrl: string;
  /**
   * How a person signs in: your OpenID Connect issuer and the page's own client there (authorization code with PKCE,
   * a public client without a secret, redirect URI `<baseUrl>/approvals/callback`). The page takes only ID tokens
   * whose audience is this client, so no agent's token can decide.
   */
  signIn: {
    /** The issuer (`iss`) of the ID tokens. */
    issuer: string;
    /** Its key set. */
    jwksUrl: string;
    clientId: string;
    authorizeUrl: string;
    tokenUrl: string;
    /** The claim of a person's ID token that names their tenant (e.g. `custom:tenant`). */
    tenantClaim: string;
    /** Default `['openid']`. */
    scopes?: string[];
  };
  clock?: Clock;
  /** Where the page logs (sign-in failures, decisions): anything with `console`'s `info` and `warn`. Default JSON lines on standard error. */
  logger?: Pick<Console, 'info' | 'warn'>;
}): Hono {
  const { secret, signIn } = options;
  if (typeof secret === 'string' && secret.length < MIN_SECRET_LENGTH)
    throw new Error(`the approval page's secret must be at least ${MIN_SECRET_LENGTH} characters`);
  // Plain http only on this machine: elsewhere a key set or token answer in clear text can be swapped on the way.
  const secure = (url: URL) =>
    url.protocol === 'https:' || (url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname));
  const base = new URL(options.baseUrl);
  if (!secure(base)) throw new Error(`the approval page's baseUrl must be https (http only on a loopback address): ${options.baseUrl}`);
  for (const [name, value] of Object.entries({ authorizeUrl: signIn.authorizeUrl, tokenUrl: signIn.tokenUrl, jwksUrl: signIn.jwksUrl })) {
    if (!/^https?:\/\//.test(value)) throw new Error(`the approval page's signIn.${name} must be an absolute http(s) URL: ${value}`);
    if (name !== 'authorizeUrl' && !secure(new URL(value)))
      throw new Error(`the approval page's signIn.${name} must be https (http only on a loopback address): ${value}`);
  }
  const page = createApprovalPage({
    config: {
      auth: { mode: 'oidc', issuer: signIn.issuer, jwksUrl: signIn.jwksUrl, tenantClaim: signIn.tenantClaim, requiredScopes: [] },
      publicBaseUrl: base.origin,
      approvals: {
        baseUrl: base.origin,
        signIn: {
          clientId: signIn.clientId,
          authorizeUrl: signIn.authorizeUrl,
          tokenUrl: signIn.tokenUrl,
          scopes: signIn.scopes ?? ['openid'],
          tenantClaim: signIn.tenantClaim,
        },
      },
    },
    approvals: options.approvals,
    signingSecret: typeof secret === 'string' ? () => Promise.resolve(secret) : secret,
    clock: options.clock ?? systemClock,
    logger: options.logger ?? stderrLogger(),
  });
  return new Hono().route(APPROVALS_PATH, page);
}
