import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayToolsModule, secretCredentials } from '../../lambdas/gateway/lambda';
import { startSecretsManager, type SecretsManagerStandIn } from '../support/secrets-manager';
import { contract, newKey, sdkClient, startEverythingGateway, type EverythingGateway, type HttpRelay, type TestGateway } from './support';

/**
 * The deployed credential source: the credentials JSON read from Secrets Manager (a stand-in speaking its API, read
 * with the SDK's client), in front of server-everything over streamable HTTP through a relay that sees every header.
 */
const policy = {
  tools: {
    echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000 },
    'get-sum': { kind: 'read' },
  },
};

const ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:vendor-gateway/credentials-AbCdEf';
const credentialsJson = JSON.stringify({
  tenants: {
    demo: { header: { name: 'Authorization', value: 'Bearer from-the-secret-for-demo' } },
    '*': { header: { name: 'X-Api-Key', value: 'from-the-secret-for-everyone-else' } },
  },
});

/** Mutable: a test changes a secret's value between reads, as a rotation would. */
const secrets: Record<string, string> = { [ARN]: credentialsJson };
let secretsManager: SecretsManagerStandIn;
let setup: EverythingGateway;
let relay: HttpRelay;
let gateway: TestGateway;
let client: Client;

beforeAll(async () => {
  secretsManager = await startSecretsManager(secrets);
  setup = await startEverythingGateway({ policy, credentials: secretCredentials(ARN, secretsManager.endpoint) });
  ({ relay, gateway } = setup);
  client = await sdkClient(gateway, 'demo');
});
afterAll(async () => {
  await client?.close();
  await setup?.stop();
  await secretsManager?.stop();
});

const readsOf = (secretId: string) => secretsManager.requests.filter((request) => request.secretId === secretId);
const echoes = (message: string) => setup.echoes(message);

/** A write until it settles (a tenant's first call opens the gateway's connection for its credential). */
async function echo(agent: Client, message: string): Promise<string> {
  const key = newKey();
  let outcome = '';
  for (let attempt = 0; attempt < 60 && outcome !== 'succeeded'; attempt++) {
    outcome = contract(await agent.callTool({ name: 'echo', arguments: { message, idempotency_key: key } })).outcome;
    if (outcome !== 'succeeded') await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return outcome;
}

describe('secretCredentials: the gateway upstream credentials from Secrets Manager', () => {
  it("a tenant's header in the secret reaches the upstream; another tenant gets *'s; the secret is read once", async () => {
    const mine = `demo ${newKey()}`;
    expect(await echo(client, mine)).toBe('succeeded');
    const other = await sdkClient(gateway, 'globex');
    const theirs = `globex ${newKey()}`;
    expect(await echo(other, theirs)).toBe('succeeded');
    await other.close();

    expect(echoes(mine).map((call) => call.authorization)).toEqual(['Bearer from-the-secret-for-demo']);
    expect(echoes(theirs)).toHaveLength(1);
    expect(echoes(theirs)[0]!.authorization).toBeUndefined();
    // The gateway's own token for the agent never reaches the upstream; only the secret's credential does.
    expect([...relay.authorizations]).toEqual(['Bearer from-the-secret-for-demo']);
    // Read at start (the listing) and kept: neither tenant's call read it again. Signed, as Secrets Manager requires.
    expect(readsOf(ARN)).toHaveLength(1);
    expect(readsOf(ARN).every((request) => request.signed)).toBe(true);
  });

  it('the deployed tools module reads the secret named by GATEWAY_CREDENTIALS_SECRET_ARN at SECRETS_MANAGER_ENDPOINT', async () => {
    const arn = `${ARN}-module`;
    secrets[arn] = JSON.stringify({ tenants: { '*': { header: { name: 'Authorization', value: 'Bearer listing-from-the-module-secret' } } } });
    const { tools } = await gatewayToolsModule(policy, {
      GATEWAY_UPSTREAM_URL: relay.url,
      GATEWAY_CREDENTIALS_SECRET_ARN: arn,
      SECRETS_MANAGER_ENDPOINT: secretsManager.endpoint,
      TABLE_NAME: gateway.table.tableName,
      DYNAMODB_ENDPOINT: gateway.table.endpoint,
    });
    expect(tools.map((tool) => tool.name).sort()).toEqual(['echo', 'get-sum']);
    expect(readsOf(arn)).toHaveLength(1);
    expect(relay.authorizations).toContain('Bearer listing-from-the-module-secret');
  });

  it('a secret that is not JSON is refused in one sentence naming the secret (its value not repeated)', async () => {
    const arn = `${ARN}-not-json`;
    secrets[arn] = 'tenants: demo: Bearer not-json-secret-value';
    const error = await secretCredentials(arn, secretsManager.endpoint).forListing().then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error?.message).toBe(`the gateway's upstream credentials secret ${arn} is not JSON`);
  });

  it('a secret of a bad shape is refused in one sentence naming the secret and the field (its value not repeated)', async () => {
    const arn = `${ARN}-bad-shape`;
    secrets[arn] = JSON.stringify({ tenants: { demo: { header: { name: 'Bad Header', value: 'Bearer bad-shape-secret-value' } } } });
    const bad = await secretCredentials(arn, secretsManager.endpoint).forTenant('demo').then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(bad?.message).toMatch(new RegExp(`^the secret ${arn.replace(/[-/]/g, '\\$&')}: tenant demo, field header\\.name: must be an HTTP header name$`));
    expect(bad?.message).not.toContain('bad-shape-secret-value');

    secrets[arn] = JSON.stringify({ demo: { none: true } });
    const wrongTop = await secretCredentials(arn, secretsManager.endpoint).forTenant('demo').then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(wrongTop?.message.split('\n')).toHaveLength(1);
    expect(wrongTop?.message).toContain(`the secret ${arn}: it must be { "tenants"`);
  });

  it('a failed read is not kept: the next call reads again and gets the credential', async () => {
    const arn = `${ARN}-flaky`;
    secrets[arn] = credentialsJson;
    const source = secretCredentials(arn, secretsManager.endpoint);
    secretsManager.failNext = 1;
    await expect(source.forTenant('demo')).rejects.toThrow(/the gateway's upstream credentials could not be read from Secrets Manager: InternalServiceError/);
    expect(await source.forTenant('demo')).toEqual({ header: { name: 'Authorization', value: 'Bearer from-the-secret-for-demo' } });
    expect(readsOf(arn)).toHaveLength(2);
    // Once read, kept: no third read.
    expect(await source.forTenant('someone')).toEqual({ header: { name: 'X-Api-Key', value: 'from-the-secret-for-everyone-else' } });
    expect(readsOf(arn)).toHaveLength(2);
  });

  it('a refused value is not kept either: once the secret is fixed, the next call reads the new value', async () => {
    const arn = `${ARN}-fixed`;
    secrets[arn] = '{ "tenants": ';
    const source = secretCredentials(arn, secretsManager.endpoint);
    await expect(source.forTenant('demo')).rejects.toThrow(`the gateway's upstream credentials secret ${arn} is not JSON`);
    secrets[arn] = credentialsJson;
    expect(await source.forTenant('demo')).toEqual({ header: { name: 'Authorization', value: 'Bearer from-the-secret-for-demo' } });
    expect(readsOf(arn)).toHaveLength(2);
  });
});
