import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultProvider } from '../../lib/bundle-stubs/credential-provider-lambda';
import { LambdaBundle } from '../../lib/bundling';

/**
 * The Lambda bundles replace the SDK's default credential chain with its first link: the environment, where Lambda
 * puts the execution role's credentials. Here, that this link resolves them and fails loudly without them.
 */
describe('the credential provider of the Lambda bundles', () => {
  const names = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'] as const;
  const saved: Record<string, string | undefined> = {};
  beforeEach(() => {
    for (const name of names) saved[name] = process.env[name];
  });
  afterEach(() => {
    for (const name of names) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  it('stands in for @aws-sdk/credential-provider-node in every Lambda bundle', () => {
    expect(LambdaBundle.alias['@aws-sdk/credential-provider-node']).toMatch(/bundle-stubs\/credential-provider-lambda\.ts$/);
  });

  it("resolves the role's session credentials from the environment, as Lambda sets them", async () => {
    process.env.AWS_ACCESS_KEY_ID = 'ASIAEXAMPLE';
    process.env.AWS_SECRET_ACCESS_KEY = 'secret';
    process.env.AWS_SESSION_TOKEN = 'session';
    await expect(defaultProvider({})()).resolves.toMatchObject({ accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret', sessionToken: 'session' });
  });

  it('fails with the SDK error when the environment holds no credentials', async () => {
    for (const name of names) delete process.env[name];
    await expect(defaultProvider({})()).rejects.toMatchObject({ name: 'CredentialsProviderError' });
  });
});
