import { join } from 'node:path';
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import { type AuthConfig, DEFAULT_DEV_SCOPE } from '../config';
import { validateTenantId } from '../core/idempotency-key';
import { DEV_KEY_FILE, type StoredKeyPair } from './dev-keys';
import { readOrCreateStateFile } from './state-file';

/**
 * The local issuer of `npm start`, `npm run token` and the tests: one ES256 key pair, generated on first use and
 * kept in `<dir>/dev-issuer.json` (dev-keys.ts), so tokens printed by one process verify in another and across restarts.
 */
const ALGORITHM = 'ES256';
export const DEV_TOKEN_TTL_SECONDS = 24 * 3600;

/**
 * The local development token issuer: signs a tenant's bearer token with the key kept in the local state folder.
 */
export interface DevIssuer {
  issuer: string;
  audience: string;
  tenantClaim: string;
  /** The public half, as a JWKS document, for the verifier. */
  jwks: { keys: JWK[] };
  /** `scope`: the token's space-separated scopes (default: the issuer's `defaultScope`; '' for none). */
  /** `audience`: default the endpoint's (an ID token of the approval page carries the page's client id instead). */
  sign(claims: {
    tenant: string;
    subject?: string;
    ttlSeconds?: number;
    scope?: string;
    audience?: string;
    extra?: Record<string, unknown>;
  }): Promise<string>;
}

async function loadOrCreateKeyPair(dir: string): Promise<StoredKeyPair> {
  const text = await readOrCreateStateFile(join(dir, DEV_KEY_FILE), async () => {
    const { privateKey, publicKey } = await generateKeyPair(ALGORITHM, { extractable: true });
    const kid = `dev-${Date.now().toString(36)}`;
    const pair: StoredKeyPair = {
      kid,
      privateJwk: { ...(await exportJWK(privateKey)), kid, alg: ALGORITHM },
      publicJwk: { ...(await exportJWK(publicKey)), kid, alg: ALGORITHM, use: 'sig' },
    };
    return JSON.stringify(pair, null, 2);
  });
  return JSON.parse(text) as StoredKeyPair;
}

export async function loadDevIssuer(options: {
  dir: string;
  issuer: string;
  audience: string;
  tenantClaim: string;
  /** What tokens carry when `sign` is given no scope: what the local endpoint requires. */
  defaultScope?: string;
}): Promise<DevIssuer> {
  const pair = await loadOrCreateKeyPair(options.dir);
  const privateKey = await importJWK(pair.privateJwk, ALGORITHM);
  return {
    issuer: options.issuer,
    audience: options.audience,
    tenantClaim: options.tenantClaim,
    jwks: { keys: [pair.publicJwk] },
    async sign({
      tenant,
      subject,
      ttlSeconds = DEV_TOKEN_TTL_SECONDS,
      scope = options.defaultScope ?? DEFAULT_DEV_SCOPE,
      audience = options.audience,
      extra = {},
    }) {
      validateTenantId(tenant);
      return new SignJWT({ ...extra, ...(scope ? { scope } : {}), [options.tenantClaim]: tenant })
        .setProtectedHeader({ alg: ALGORITHM, kid: pair.kid, typ: 'JWT' })
        .setIssuer(options.issuer)
        .setAudience(audience)
        .setSubject(subject ?? `dev-user@${tenant}`)
        .setIssuedAt()
        .setExpirationTime(`${ttlSeconds}s`)
        .sign(privateKey);
    },
  };
}

/**
 * The issuer a dev-mode endpoint trusts; its tokens carry the scopes that endpoint requires unless told otherwise.
 */
export function devIssuerFor(auth: Extract<AuthConfig, { mode: 'dev' }>): Promise<DevIssuer> {
  return loadDevIssuer({
    dir: auth.devAuthDir,
    issuer: auth.issuer,
    audience: auth.audience,
    tenantClaim: auth.tenantClaim,
    defaultScope: auth.requiredScopes.join(' '),
  });
}
