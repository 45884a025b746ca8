import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompactSign, importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevIssuer } from './dev-issuer';
import { readDevKeyPair } from './dev-keys';
import { AuthenticationError, createTokenVerifier } from './verifier';
import { InvalidTenantError } from '../core/errors';
import { validateTenantId } from '../core/idempotency-key';

/**
 * The verifier of `npm start` reads the local issuer's public key from the file the issuer writes (it does not make
 * keys itself, so the Lambda bundles carry no key generation or signing).
 */
describe('the dev-mode verifier', () => {
  let dir: string;
  const auth = { issuer: 'urn:test:dev', audience: 'mcp', tenantClaim: 'tenant' };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dev-verifier-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('refuses tokens while the issuer has no key, then verifies its tokens once it has one', async () => {
    const verifier = createTokenVerifier({ mode: 'dev', devAuthDir: dir, requiredScopes: [], ...auth });
    const stranger = await (await loadDevIssuer({ dir: join(dir, 'elsewhere'), ...auth })).sign({ tenant: 'tenant-a' });
    const refused = await verifier.verify(`Bearer ${stranger}`).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect(refused).toMatchObject({ bearerError: 'invalid_token' });

    // The failed read was not kept: the key made now is read on the next request.
    const issuer = await loadDevIssuer({ dir, ...auth });
    expect(await verifier.verify(`Bearer ${await issuer.sign({ tenant: 'tenant-a' })}`)).toMatchObject({ tenant: 'tenant-a' });
    // ...and a token of another key still fails.
    await expect(verifier.verify(`Bearer ${stranger}`)).rejects.toBeInstanceOf(AuthenticationError);
  });

  it('refuses a token whose exp, nbf or iat is not a finite number (1e309 parses to Infinity)', async () => {
    await loadDevIssuer({ dir, ...auth });
    const verifier = createTokenVerifier({ mode: 'dev', devAuthDir: dir, requiredScopes: [], ...auth });
    const pair = await readDevKeyPair(dir);
    const key = await importJWK(pair.privateJwk, 'ES256');
    const now = Math.floor(Date.now() / 1000);
    // Written as JSON text: JSON.stringify would turn Infinity into null.
    const sign = (times: string) =>
      new CompactSign(new TextEncoder().encode(`{"iss":"${auth.issuer}","aud":"${auth.audience}","tenant":"tenant-a",${times}}`))
        .setProtectedHeader({ alg: 'ES256', kid: pair.kid, typ: 'JWT' })
        .sign(key);

    expect(await verifier.verify(`Bearer ${await sign(`"exp":${now + 600},"iat":${now},"nbf":${now}`)}`)).toMatchObject({
      tenant: 'tenant-a',
    });
    for (const times of [`"exp":1e309`, `"exp":${now + 600},"nbf":-1e309`, `"exp":${now + 600},"iat":1e309`]) {
      const refused = await verifier.verify(`Bearer ${await sign(times)}`).catch((err: unknown) => err);
      expect(refused, times).toBeInstanceOf(AuthenticationError);
      expect(refused).toMatchObject({ bearerError: 'invalid_token' });
    }
  });
});

describe('ID tokens of the approval page: the authorized party (azp)', () => {
  let dir: string;
  const auth = { issuer: 'urn:test:dev', audience: 'approval-page', tenantClaim: 'tenant' };
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dev-verifier-azp-'));
    await loadDevIssuer({ dir, ...auth });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const sign = async (claims: Record<string, unknown>) => {
    const pair = await readDevKeyPair(dir);
    const now = Math.floor(Date.now() / 1000);
    return new CompactSign(
      new TextEncoder().encode(JSON.stringify({ iss: auth.issuer, tenant: 'tenant-a', sub: 'alice', exp: now + 300, iat: now, ...claims })),
    )
      .setProtectedHeader({ alg: 'ES256', kid: pair.kid, typ: 'JWT' })
      .sign(await importJWK(pair.privateJwk, 'ES256'));
  };

  it("a token for several audiences counts only when its azp is the page's client; any azp must be it", async () => {
    const page = createTokenVerifier({ mode: 'dev', devAuthDir: dir, requiredScopes: [], ...auth }, { authorizedParty: 'approval-page' });
    const accepted = [
      { aud: 'approval-page' },
      { aud: ['approval-page'] },
      { aud: ['approval-page', 'other-app'], azp: 'approval-page' },
      { aud: 'approval-page', azp: 'approval-page' },
    ];
    for (const claims of accepted)
      expect(await page.verify(`Bearer ${await sign(claims)}`), JSON.stringify(claims)).toMatchObject({ tenant: 'tenant-a' });
    const refused = [
      { aud: ['approval-page', 'other-app'] },
      { aud: ['other-app', 'approval-page'], azp: 'other-app' },
      { aud: 'approval-page', azp: 'other-app' },
    ];
    for (const claims of refused) {
      const error = await page.verify(`Bearer ${await sign(claims)}`).catch((err: unknown) => err);
      expect(error, JSON.stringify(claims)).toBeInstanceOf(AuthenticationError);
      expect(error).toMatchObject({ bearerError: 'invalid_token', message: expect.stringContaining('azp') });
    }
  });
});

describe('tenant ids that are words of the language', () => {
  let dir: string;
  const auth = { issuer: 'urn:test:dev', audience: 'mcp', tenantClaim: 'tenant' };
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dev-verifier-words-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it.each(['undefined', 'null', '__proto__', 'constructor', 'NaN'])(
    'refuses a token whose tenant claim is %s, and the dev issuer will not sign one',
    async (tenant) => {
      await expect(validateTenantIdAsync(tenant)).rejects.toBeInstanceOf(InvalidTenantError);
      const issuer = await loadDevIssuer({ dir, ...auth });
      await expect(issuer.sign({ tenant })).rejects.toThrow(/tenant/);
      // Signed by hand, as a compromised or careless issuer would: the verifier refuses it all the same.
      const pair = await readDevKeyPair(dir);
      const now = Math.floor(Date.now() / 1000);
      const token = await new CompactSign(
        new TextEncoder().encode(JSON.stringify({ iss: auth.issuer, aud: auth.audience, tenant, exp: now + 600, iat: now })),
      )
        .setProtectedHeader({ alg: 'ES256', kid: pair.kid, typ: 'JWT' })
        .sign(await importJWK(pair.privateJwk, 'ES256'));
      const verifier = createTokenVerifier({ mode: 'dev', devAuthDir: dir, requiredScopes: [], ...auth });
      const refused = await verifier.verify(`Bearer ${token}`).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(AuthenticationError);
      expect((refused as Error).message).toMatch(/not a valid tenant id/);
    },
  );

  it('still accepts tenants that merely contain such a word', async () => {
    for (const tenant of ['null-corp', 'undefined.team', 'proto', 'acme']) expect(validateTenantId(tenant)).toBe(tenant);
  });
});

const validateTenantIdAsync = async (tenant: unknown) => validateTenantId(tenant);

describe('a missing or malformed bearer token', () => {
  const verifier = createTokenVerifier({
    mode: 'dev',
    devAuthDir: join(tmpdir(), 'no-such-dir'),
    requiredScopes: [],
    issuer: 'urn:test:dev',
    audience: 'mcp',
    tenantClaim: 'tenant',
  });
  const refusal = (header: string | undefined) =>
    verifier.verify(header).then(
      () => 'accepted',
      (err: Error) => err.message,
    );

  it('is answered with what is wrong with the header, not that a token failed verification', async () => {
    // `Bearer ${process.env.TOKEN}` with TOKEN unset: the commonest first-hour mistake.
    expect(await refusal('Bearer undefined')).toMatch(/not a JWT.*unset/);
    expect(await refusal('Bearer ')).toMatch(/no token after it/);
    expect(await refusal(undefined)).toMatch(/bearer token is required/);
    expect(await refusal('Basic dXNlcjpwYXNz')).toMatch(/must be "Bearer <token>"/);
    for (const message of await Promise.all(['Bearer undefined', 'Bearer '].map(refusal)))
      expect(message).not.toMatch(/not valid for this server/);
  });
});

describe('the local issuer key, made by processes starting at once', () => {
  it('issuers and readers started at once all get the one key, and no draft is left behind', async () => {
    for (let round = 0; round < 10; round++) {
      const fresh = await mkdtemp(join(tmpdir(), 'dev-key-race-'));
      try {
        const options = { dir: fresh, issuer: 'https://local.test', audience: 'local', tenantClaim: 'tenant' };
        const issuers = Array.from({ length: 12 }, () => loadDevIssuer(options));
        const readers = Array.from({ length: 24 }, async () => {
          // A reader that comes before the key exists sees none (ENOENT), never a partial file.
          for (;;) {
            try {
              return (await readDevKeyPair(fresh)).kid;
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
              await new Promise((resolve) => setImmediate(resolve));
            }
          }
        });
        const kids = [...(await Promise.all(issuers)).map((issuer) => issuer.jwks.keys[0]!.kid), ...(await Promise.all(readers))];
        expect(new Set(kids).size).toBe(1);
        expect((await readdir(fresh)).filter((name) => name.endsWith('.tmp'))).toEqual([]);
      } finally {
        await rm(fresh, { recursive: true, force: true });
      }
    }
  });
});
