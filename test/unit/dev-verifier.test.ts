import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevIssuer } from '../../lambdas/auth/dev-issuer';
import { AuthenticationError, createTokenVerifier } from '../../lambdas/auth/verifier';

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
});
