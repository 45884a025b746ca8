import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  jwtVerify,
  type CompactJWSHeaderParameters,
  type FlattenedJWSInput,
  type JWTVerifyGetKey,
} from 'jose';
import type { AuthConfig } from '../config';
import { IdempotencyError } from '../core/errors';
import { validateTenantId } from '../core/idempotency-key';
import { readDevJwks } from './dev-keys';
import { fetchJwks } from './jwks-fetch';

/** How far the token issuer's clock and ours may disagree on `exp` and `nbf` (docs/security.md says it). */
export const CLOCK_TOLERANCE_SECONDS = 30;

/**
 * Who is calling: the tenant comes from the verified token and nowhere else.
 *
 * @public
 */
export interface Caller {
  /** The tenant, from the verified token only: every key is scoped to it. */
  tenant: string;
  /** Who the token names: its `sub` at the endpoint, the OAuth client id under `registerWriteTool`; 'unknown' when it names none. */
  subject: string;
  /** The token's scopes (`scope`, space-separated, or `scp`, a list); empty when it names none. */
  scopes?: readonly string[];
}

/** The scopes a token's claims grant: RFC 9068 / Cognito `scope` (space-separated) or Entra / Okta `scp` (list or string). */
function tokenScopes(payload: Record<string, unknown>): string[] {
  const words = (value: unknown): string[] =>
    typeof value === 'string'
      ? value.split(' ').filter(Boolean)
      : Array.isArray(value)
        ? value.filter((v): v is string => typeof v === 'string')
        : [];
  return [...new Set([...words(payload.scope), ...words(payload.scp)])];
}

/** The required scopes the caller's token does not grant. */
export function missingScopes(caller: Caller, required: readonly string[]): string[] {
  const granted = new Set(caller.scopes ?? []);
  return required.filter((scope) => !granted.has(scope));
}

/**
 * A missing or unacceptable token; the message is safe to return (it never echoes the token).
 */
export class AuthenticationError extends Error {
  constructor(
    message: string,
    /** RFC 6750: 'invalid_token' when a token was presented, absent when none was. */
    readonly bearerError?: 'invalid_token',
  ) {
    super(message);
    this.name = 'AuthenticationError';
  }
}

/**
 * The issuer's key set could not be fetched: answered 503, the client may retry.
 */
export class AuthUnavailableError extends Error {
  constructor(options?: { cause?: unknown }) {
    super('the token issuer could not be reached', options);
    this.name = 'AuthUnavailableError';
  }
}

/**
 * Verifies a bearer token and answers its caller (the tenant from the verified token).
 */
export interface TokenVerifier {
  /** Verifies an `Authorization` header value; throws AuthenticationError. */
  verify(authorization: string | undefined): Promise<Caller>;
  /**
   * Starts reading the issuer's key set now (a cold start's init), so that the first request does not wait for it.
   * Never fails: a key set it could not get is fetched by the first request that needs it, as without it.
   * Optional: a verifier with nothing to fetch (or a team's own) leaves it out.
   */
  prefetch?(): void;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
// Asymmetric algorithms only: an 'HS256' token signed with a public key as its secret must never verify.
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

const TIME_CLAIMS = ['exp', 'nbf', 'iat'] as const;

/** How many verified tokens a verifier remembers (a container sees few; the local server many tenants). */
const VERIFIED_TOKENS_MAX = 512;
/** Longer tokens are verified every time rather than remembered (the memory a full cache may hold stays small). */
const VERIFIED_TOKEN_MAX_LENGTH = 8192;

/**
 * A token that passed every check, remembered by its exact string: what deciding on it again needs. The signature,
 * issuer, audience, algorithm and claims are facts of the string and of the key that verified it, so they hold again
 * for the same string and key; time and the key set do not, so a hit checks both again (docs/security.md).
 */
interface VerifiedToken {
  caller: Caller;
  /** The key jose resolved and verified the signature with: a hit needs the key set to resolve this very object. */
  key: unknown;
  /** What jose asked the key set with: the protected header and the token's parts. */
  header: CompactJWSHeaderParameters;
  parts: FlattenedJWSInput;
  exp: number;
  nbf?: number;
}

/** jose's own time checks (validateClaimsSet): expired at `exp <= now - tolerance`, early at `nbf > now + tolerance`. */
function inTime(token: Pick<VerifiedToken, 'exp' | 'nbf'>): boolean {
  const now = Math.floor(Date.now() / 1000);
  return token.exp > now - CLOCK_TOLERANCE_SECONDS && !(token.nbf !== undefined && token.nbf > now + CLOCK_TOLERANCE_SECONDS);
}

export interface TokenVerifierOptions {
  /**
   * For ID tokens (the approval page's sign-in): the client they were issued to. OpenID Connect Core 3.1.3.7: a
   * token whose audience has several values must name it in `azp`, and any `azp` it carries must be it.
   */
  authorizedParty?: string;
}

/** The one algorithm a key verifies with, when the key says it or its type allows no other (RFC 7518 3.4, RFC 8037). */
function keyAlgorithm(jwk: { alg?: string; kty?: string; crv?: string; use?: string }): string | undefined {
  // An encryption key is never asked for (and asking would count as a miss against the refetch cooldown).
  if (jwk.use !== undefined && jwk.use !== 'sig') return undefined;
  if (jwk.alg) return ALGORITHMS.includes(jwk.alg) ? jwk.alg : undefined;
  if (jwk.kty === 'EC') return { 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512' }[jwk.crv ?? ''];
  return jwk.kty === 'OKP' && jwk.crv === 'Ed25519' ? 'EdDSA' : undefined;
}

/**
 * Imports the set's keys as jose will use them (it caches each import by key and algorithm), so the first request's
 * verification does not import its key. Only keys with an id and one algorithm; a key that fails is left to the
 * request that names it, which reports it as before.
 */
async function importKeys(set: ReturnType<typeof createRemoteJWKSet>): Promise<void> {
  await Promise.all(
    (set.jwks()?.keys ?? []).map((jwk) => {
      const alg = keyAlgorithm(jwk);
      return alg && jwk.kid ? set({ alg, kid: jwk.kid }).catch(() => {}) : undefined;
    }),
  );
}

export function createTokenVerifier(auth: AuthConfig, options: TokenVerifierOptions = {}): TokenVerifier {
  let keys: Promise<JWTVerifyGetKey> | undefined;
  // jose caches the key set and refetches it when a token names an unknown key id (key rotation), at most once per
  // cooldown; a failed fetch is not kept, the next request fetches again.
  let remote: ReturnType<typeof createRemoteJWKSet> | undefined;
  const remoteKeys = (url: string) =>
    (remote ??= createRemoteJWKSet(new URL(url), { timeoutDuration: 3000, cooldownDuration: 30_000, [customFetch]: fetchJwks }));
  // Built once per container, lazily.
  const getKeys = (): Promise<JWTVerifyGetKey> => {
    if (auth.mode === 'oidc') return (keys ??= Promise.resolve(remoteKeys(auth.jwksUrl)));
    // The local issuer's public key, from the file the issuer wrote when it made its key. Until then no token of it
    // can exist: the request is refused. A failed read (or a file caught half-written) is not kept: the next reads again.
    return (keys ??= readDevJwks(auth.devAuthDir)
      .then(createLocalJWKSet)
      .catch((err: NodeJS.ErrnoException) => {
        keys = undefined;
        if (err.code !== 'ENOENT') throw err;
        throw new AuthenticationError('the token is not valid for this server (the local issuer has no key yet)', 'invalid_token');
      }));
  };

  // Verifying an ES256 signature is most of a replay's own CPU; a client sends the same token on every call until it
  // expires. Only successes are kept; a miss, or a hit that fails its checks, runs the whole verification below.
  const verified = new Map<string, VerifiedToken>();
  const remembered = async (token: string): Promise<Caller | undefined> => {
    const hit = verified.get(token);
    if (!hit) return undefined;
    if (inTime(hit)) {
      // The key set as jose has it now (refetched when stale, as for any verification): the token counts only while
      // it still resolves the very key that verified it. A rotated-out key, a refetched set (new key objects) or a
      // failed fetch is a miss, decided by the full verification.
      const current = await getKeys()
        .then((getKey) => getKey(hit.header, hit.parts))
        .catch(() => undefined);
      if (current === hit.key) return hit.caller;
    }
    verified.delete(token);
    return undefined;
  };
  const remember = (token: string, entry: VerifiedToken) => {
    if (token.length > VERIFIED_TOKEN_MAX_LENGTH) return;
    if (verified.size >= VERIFIED_TOKENS_MAX) verified.delete(verified.keys().next().value!);
    verified.set(token, entry);
  };

  return {
    prefetch() {
      if (auth.mode === 'oidc') {
        const set = remoteKeys(auth.jwksUrl);
        set
          .reload()
          .then(() => importKeys(set))
          .catch(() => {});
      } else getKeys().catch(() => {});
    },
    async verify(authorization) {
      if (!authorization?.trim())
        throw new AuthenticationError('a bearer token is required: send the header "Authorization: Bearer <token>"');
      const match = BEARER.exec(authorization.trim());
      if (!match) {
        const reason = /^Bearer\s*$/i.test(authorization.trim())
          ? 'the Authorization header has "Bearer" but no token after it (is the variable holding the token empty?)'
          : 'the Authorization header must be "Bearer <token>"';
        throw new AuthenticationError(reason, 'invalid_token');
      }
      // A JWT is three base64url parts. Anything else (`Bearer undefined`, `Bearer $TOKEN` unexpanded) is a client
      // that sent a placeholder: say so, rather than that a token failed verification.
      if (!JWT_SHAPE.test(match[1]!))
        throw new AuthenticationError(
          `the bearer token is not a JWT (got ${match[1]!.length} characters without the three dot-separated parts of one; was the variable holding the token unset?)`,
          'invalid_token',
        );
      const token = match[1]!;
      const known = await remembered(token);
      if (known) return known;
      const getKey = await getKeys();
      let payload: Record<string, unknown>;
      let header: CompactJWSHeaderParameters | undefined;
      let parts: FlattenedJWSInput | undefined;
      let key: unknown;
      try {
        // The key set is asked through this wrapper so that what it resolved (the very object) can be remembered.
        const resolveKey: JWTVerifyGetKey = async (protectedHeader, input) => {
          header = protectedHeader;
          parts = input;
          return (key = await getKey(protectedHeader, input));
        };
        ({ payload } = await jwtVerify(token, resolveKey, {
          issuer: auth.issuer,
          audience: auth.audience,
          algorithms: ALGORITHMS,
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          requiredClaims: ['exp'],
        }));
      } catch (err) {
        const code = (err as { code?: string }).code;
        // Our side failed (key set unreachable, or not a key set: jose raises ERR_JWKS_INVALID only for the set's own
        // content): the token may be fine, so this is not a 401, which would send every client to log in again.
        if (code === undefined || code === 'ERR_JWKS_TIMEOUT' || code === 'ERR_JOSE_GENERIC' || code === 'ERR_JWKS_INVALID')
          throw new AuthUnavailableError({ cause: err });
        const reason = code === 'ERR_JWT_EXPIRED' ? 'the token has expired' : 'the token is not valid for this server';
        throw new AuthenticationError(reason, 'invalid_token');
      }
      const party = options.authorizedParty;
      if (
        party !== undefined &&
        (payload.azp !== undefined || (Array.isArray(payload.aud) && payload.aud.length > 1)) &&
        payload.azp !== party
      )
        throw new AuthenticationError('the token was issued to another client (azp)', 'invalid_token');
      // JSON has no Infinity, but 1e309 parses to it and passes jose's checks: such an `exp` would never expire.
      if (TIME_CLAIMS.some((claim) => payload[claim] !== undefined && !Number.isFinite(payload[claim])))
        throw new AuthenticationError("the token's exp, nbf and iat must be finite numbers", 'invalid_token');
      const tenant = payload[auth.tenantClaim];
      try {
        validateTenantId(tenant);
      } catch (err) {
        if (err instanceof IdempotencyError)
          throw new AuthenticationError(`the token's "${auth.tenantClaim}" claim is not a valid tenant id`, 'invalid_token');
        throw err;
      }
      const caller: Caller = Object.freeze({
        tenant: tenant as string,
        subject: typeof payload.sub === 'string' ? payload.sub : 'unknown',
        scopes: Object.freeze(tokenScopes(payload)),
      });
      // `exp` is required, so a verified payload has one; the key set resolved exactly one key (several matching fail).
      if (typeof payload.exp === 'number' && header && parts && key !== undefined)
        remember(token, { caller, key, header, parts, exp: payload.exp, nbf: typeof payload.nbf === 'number' ? payload.nbf : undefined });
      return caller;
    },
  };
}
