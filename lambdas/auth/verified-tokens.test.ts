import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { startKeySetServer, type KeySetServer } from '../../test/support/key-set-server';
import { loadDevIssuer, type DevIssuer } from './dev-issuer';
import { AuthenticationError, AuthUnavailableError, CLOCK_TOLERANCE_SECONDS, createTokenVerifier, type TokenVerifier } from './verifier';

/**
 * The verifier remembers the tokens it verified, by their exact string, so that a client's next call with the same
 * token does not verify its signature again. What it must never do is accept, from memory, a token the full
 * verification would refuse: another string, a token past its time, or one whose key the issuer's key set no longer
 * holds (docs/security.md, "Verified tokens").
 */
describe('the verifier remembers a verified token, and refuses from memory nothing it would refuse', () => {
  const ISSUER = 'https://issuer.example';
  /** jose's default: how long it uses a fetched key set before it fetches it again on the next verification. */
  const KEY_SET_MAX_AGE_MS = 10 * 60_000;
  const dirs: string[] = [];
  let keySet: KeySetServer;
  let jwksUrl: string;

  const issuer = async (): Promise<DevIssuer> => {
    const dir = await mkdtemp(join(tmpdir(), 'verified-tokens-'));
    dirs.push(dir);
    const made = await loadDevIssuer({ dir, issuer: ISSUER, audience: 'api', tenantClaim: 'tenant' });
    // Key ids are made from the time (faked here): two issuers made at one millisecond would share one.
    vi.setSystemTime(Date.now() + 5);
    return made;
  };
  const verifier = (): TokenVerifier =>
    createTokenVerifier({ mode: 'oidc', issuer: ISSUER, audience: 'api', jwksUrl, tenantClaim: 'tenant', requiredScopes: [] });
  const later = (ms: number) => vi.setSystemTime(Date.now() + ms);

  beforeAll(async () => {
    keySet = await startKeySetServer();
    jwksUrl = keySet.url;
  });
  afterAll(async () => {
    await keySet.close();
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });
  beforeEach(() => {
    keySet.gets = 0;
    keySet.failNext = 0;
    vi.useFakeTimers({ toFake: ['Date'] });
  });
  afterEach(() => vi.useRealTimers());

  it('answers the same caller for the same token, and the key set is not fetched again', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = verifier();
    const token = `Bearer ${await current.sign({ tenant: 't1', scope: 'mcp:write' })}`;
    const first = await v.verify(token);
    expect(first).toEqual({ tenant: 't1', subject: 'dev-user@t1', scopes: ['mcp:write'] });
    expect(await v.verify(token)).toEqual(first);
    expect(keySet.gets).toBe(1);
  });

  it('refuses a token that differs from a remembered one in its signature or its claims', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = verifier();
    const token = await current.sign({ tenant: 't1' });
    await expect(v.verify(`Bearer ${token}`)).resolves.toMatchObject({ tenant: 't1' });
    const [header, payload, signature] = token.split('.') as [string, string, string];

    // One character of the signature changed (not the last, whose low bits base64url may not carry).
    const at = signature.length - 10;
    const otherSignature = signature.slice(0, at) + (signature[at] === 'A' ? 'B' : 'A') + signature.slice(at + 1);
    await expect(v.verify(`Bearer ${header}.${payload}.${otherSignature}`)).rejects.toMatchObject({
      name: 'AuthenticationError',
      message: 'the token is not valid for this server',
    });

    // The claims changed to another tenant, under the remembered token's signature.
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const otherPayload = Buffer.from(JSON.stringify({ ...claims, tenant: 't2' })).toString('base64url');
    await expect(v.verify(`Bearer ${header}.${otherPayload}.${signature}`)).rejects.toBeInstanceOf(AuthenticationError);

    // The remembered token itself still counts.
    await expect(v.verify(`Bearer ${token}`)).resolves.toMatchObject({ tenant: 't1' });
  });

  it('refuses a remembered token once it has expired, as the full verification does (30 s of tolerance)', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = verifier();
    const token = `Bearer ${await current.sign({ tenant: 't1', ttlSeconds: 60 })}`;
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    later((60 + CLOCK_TOLERANCE_SECONDS - 2) * 1000);
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    later(3000);
    await expect(v.verify(token)).rejects.toMatchObject({
      name: 'AuthenticationError',
      message: 'the token has expired',
      bearerError: 'invalid_token',
    });
  });

  it('refuses a remembered token before its nbf when the clock is set back', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = verifier();
    const now = Math.floor(Date.now() / 1000);
    const token = `Bearer ${await current.sign({ tenant: 't1', extra: { nbf: now - 10 } })}`;
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    later(-100_000);
    await expect(v.verify(token)).rejects.toMatchObject({ name: 'AuthenticationError', message: 'the token is not valid for this server' });
  });

  it('refuses a remembered token once the issuer has rotated its key out of the key set', async () => {
    const before = await issuer();
    const after = await issuer();
    keySet.served = before.jwks;
    const v = verifier();
    const token = `Bearer ${await before.sign({ tenant: 't1', ttlSeconds: 3600 })}`;
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    // The set now names only the new key; the verifier reads it again once its copy is older than jose's max age.
    expect((after.jwks.keys[0] as { kid: string }).kid).not.toBe((before.jwks.keys[0] as { kid: string }).kid);
    keySet.served = after.jwks;
    later(KEY_SET_MAX_AGE_MS + 1000);
    await expect(v.verify(token)).rejects.toMatchObject({ name: 'AuthenticationError', message: 'the token is not valid for this server' });
    expect(keySet.gets).toBe(2);
  });

  it('refuses a remembered token when its key id now names another key', async () => {
    const before = await issuer();
    const after = await issuer();
    keySet.served = before.jwks;
    const v = verifier();
    const token = `Bearer ${await before.sign({ tenant: 't1', ttlSeconds: 3600 })}`;
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    // The same kid, another key: the token still finds "its" key by id, and the signature does not match it.
    const kid = (before.jwks.keys[0] as { kid: string }).kid;
    keySet.served = { keys: [{ ...after.jwks.keys[0], kid }] };
    later(KEY_SET_MAX_AGE_MS + 1000);
    await expect(v.verify(token)).rejects.toMatchObject({ name: 'AuthenticationError', message: 'the token is not valid for this server' });
  });

  it('keeps accepting a remembered token when the key set read again still holds its key', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = verifier();
    const token = `Bearer ${await current.sign({ tenant: 't1', ttlSeconds: 3600 })}`;
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    later(KEY_SET_MAX_AGE_MS + 1000);
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    expect(keySet.gets).toBe(2);
  });

  it('answers 503 for a remembered token when the key set is due again and cannot be read, as for any token', async () => {
    const current = await issuer();
    keySet.served = current.jwks;
    const v = verifier();
    const token = `Bearer ${await current.sign({ tenant: 't1', ttlSeconds: 3600 })}`;
    await expect(v.verify(token)).resolves.toMatchObject({ tenant: 't1' });
    later(KEY_SET_MAX_AGE_MS + 1000);
    keySet.failNext = 2;
    await expect(v.verify(token)).rejects.toBeInstanceOf(AuthUnavailableError);
  });
});
