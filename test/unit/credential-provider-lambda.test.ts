import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { defaultProvider } from '../../lib/bundle-stubs/credential-provider-lambda';
import { LambdaBundle } from '../../lib/bundling';

/**
 * The Lambda bundles replace the SDK's default credential chain with the two links an execution environment can
 * serve: environment variables (where Lambda puts the role's credentials) and the container credentials endpoint.
 * Here, that each link resolves credentials, in that order, and that without either the SDK's error surfaces.
 */
describe('the credential provider of the Lambda bundles', () => {
  const names = [
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN',
    'AWS_CONTAINER_CREDENTIALS_FULL_URI',
    'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
    'AWS_CONTAINER_AUTHORIZATION_TOKEN',
    'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  ] as const;
  const saved: Record<string, string | undefined> = {};
  const expiration = new Date(Date.now() + 3600_000).toISOString();
  let endpoint: Server;
  let endpointUrl: string;
  const authorizations: Array<string | undefined> = [];

  beforeAll(async () => {
    // A container credentials endpoint, as a container agent serves it on loopback.
    endpoint = createServer((req, res) => {
      authorizations.push(req.headers.authorization);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ AccessKeyId: 'ASIACONTAINER', SecretAccessKey: 'container-secret', Token: 'container-token', Expiration: expiration }));
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    endpointUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/credentials`;
  });
  afterAll(async () => {
    await new Promise((resolve) => endpoint.close(resolve));
  });
  beforeEach(() => {
    for (const name of names) {
      saved[name] = process.env[name];
      delete process.env[name];
    }
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

  it("resolves the role's session credentials from the environment, as Lambda sets them, before any endpoint", async () => {
    process.env.AWS_ACCESS_KEY_ID = 'ASIAEXAMPLE';
    process.env.AWS_SECRET_ACCESS_KEY = 'secret';
    process.env.AWS_SESSION_TOKEN = 'session';
    process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = endpointUrl;
    const before = authorizations.length;
    await expect(defaultProvider()()).resolves.toMatchObject({ accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret', sessionToken: 'session' });
    expect(authorizations.length).toBe(before);
  });

  it('falls back to the container credentials endpoint, with its authorization token and expiry', async () => {
    process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = endpointUrl;
    process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN = 'agent-token';
    const credentials = await defaultProvider()();
    expect(credentials).toMatchObject({ accessKeyId: 'ASIACONTAINER', secretAccessKey: 'container-secret', sessionToken: 'container-token' });
    expect(credentials.expiration?.toISOString()).toBe(expiration);
    expect(authorizations.at(-1)).toBe('agent-token');
  });

  it('is asked once per client, not per request: the SDK does not cache what a default provider returns', async () => {
    process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = endpointUrl;
    const client = new DynamoDBClient({ region: 'us-east-1', endpoint: inject('dynamodbEndpoint'), credentialDefaultProvider: defaultProvider });
    try {
      const before = authorizations.length;
      for (let i = 0; i < 3; i++) await client.send(new ListTablesCommand({ Limit: 1 }));
      expect(authorizations.length - before).toBe(1);
    } finally {
      client.destroy();
    }
  });

  it('fails with the SDK error when neither holds credentials, on use: building the provider does not throw', async () => {
    const provider = defaultProvider();
    await expect(provider()).rejects.toMatchObject({ name: 'CredentialsProviderError' });
  });
});
