import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lambdas/config';
import { gatewayToolsModule, secretCredentials } from '../../lambdas/gateway/lambda';
import { createApp } from '../../lambdas/http/app';
import { createServices } from '../../lambdas/runtime/services';
import { closeDynamoDbClient } from '../../lambdas/store/clients';
import { OwnServers } from '../support/own-server';
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
/** The MCP endpoint of a deployed function, in this process: what a cold start's tools module is served by. */
const servers = new OwnServers();

beforeAll(async () => {
  secretsManager = await startSecretsManager(secrets);
  setup = await startEverythingGateway({ policy, credentials: secretCredentials(ARN, secretsManager.endpoint) });
  ({ relay, gateway } = setup);
  client = await sdkClient(gateway, 'demo');
});
afterAll(async () => {
  await client?.close();
  await servers.close();
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
    secrets[arn] = JSON.stringify({
      tenants: { '*': { header: { name: 'Authorization', value: 'Bearer listing-from-the-module-secret' } } },
    });
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
    const error = await secretCredentials(arn, secretsManager.endpoint)
      .forListing()
      .then(
        () => undefined,
        (err: unknown) => err as Error,
      );
    expect(error?.message).toBe(`the gateway's upstream credentials secret ${arn} is not JSON`);
  });

  it('a secret of a bad shape is refused in one sentence naming the secret and the field (its value not repeated)', async () => {
    const arn = `${ARN}-bad-shape`;
    secrets[arn] = JSON.stringify({ tenants: { demo: { header: { name: 'Bad Header', value: 'Bearer bad-shape-secret-value' } } } });
    const bad = await secretCredentials(arn, secretsManager.endpoint)
      .forTenant('demo')
      .then(
        () => undefined,
        (err: unknown) => err as Error,
      );
    expect(bad?.message).toMatch(
      new RegExp(`^the secret ${arn.replace(/[-/]/g, '\\$&')}: tenant demo, field header\\.name: must be an HTTP header name$`),
    );
    expect(bad?.message).not.toContain('bad-shape-secret-value');

    secrets[arn] = JSON.stringify({ demo: { none: true } });
    const wrongTop = await secretCredentials(arn, secretsManager.endpoint)
      .forTenant('demo')
      .then(
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
    await expect(source.forTenant('demo')).rejects.toThrow(
      /the gateway's upstream credentials could not be read from Secrets Manager: InternalServiceError/,
    );
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

  /** The Lambda environment of a gateway's MCP function (IdempotentMcpGateway sets it) on this test's table. */
  const functionEnv = (arn: string) => ({
    GATEWAY_KEEP_LISTING: 'true',
    GATEWAY_UPSTREAM_URL: relay.url,
    GATEWAY_CREDENTIALS_SECRET_ARN: arn,
    SECRETS_MANAGER_ENDPOINT: secretsManager.endpoint,
    TABLE_NAME: gateway.table.tableName,
    DYNAMODB_ENDPOINT: gateway.table.endpoint,
  });
  const listings = () => relay.methods.filter((method) => method === 'tools/list').length;

  it("a cold start after one that kept the upstream's tools/list reaches neither Secrets Manager nor the upstream", async () => {
    // A policy of its own: the listing is kept per policy and upstream.
    const kept = { tools: { ...policy.tools, echo: { ...policy.tools.echo, timeoutMs: 4000 } } };
    const arn = `${ARN}-kept-listing`;
    secrets[arn] = credentialsJson;
    const before = listings();
    const first = await gatewayToolsModule(kept, functionEnv(arn));
    expect(readsOf(arn)).toHaveLength(1);
    expect(listings()).toBe(before + 1);

    const second = await gatewayToolsModule(kept, functionEnv(arn));
    expect(readsOf(arn)).toHaveLength(1);
    expect(listings()).toBe(before + 1);
    expect(second.tools.map((tool) => [tool.name, tool.description])).toEqual(first.tools.map((tool) => [tool.name, tool.description]));

    // Another policy for the same upstream is read anew.
    await gatewayToolsModule({ tools: { echo: kept.tools.echo } }, functionEnv(arn));
    expect(readsOf(arn)).toHaveLength(2);
    expect(listings()).toBe(before + 2);
  });

  it('a secret that cannot be read: UPSTREAM_CREDENTIAL_UNAVAILABLE, retryable, nothing sent; once it can, the same key runs', async () => {
    const arn = `${ARN}-unreadable`;
    // A cold start keeps the listing (the secret readable then); the secret is then lost (deleted, access revoked).
    secrets[arn] = credentialsJson;
    await gatewayToolsModule(policy, functionEnv(arn));
    delete secrets[arn];

    // The next cold start, served as the MCP function serves it.
    const { tools } = await gatewayToolsModule(policy, functionEnv(arn));
    const env = {
      ...functionEnv(arn),
      AUTH_MODE: 'dev',
      DEV_AUTH_DIR: join(gateway.stateDir, 'auth'),
      OPERATION_ID_SECRET: 'x'.repeat(48),
    };
    const services = createServices(loadConfig(env));
    try {
      const mcpUrl = await servers.listen(createApp(services, { tools }).fetch);
      const agent = await sdkClient({ mcpUrl, tokenFor: gateway.tokenFor }, 'demo');
      const message = `unreadable ${newKey()}`;
      const key = newKey();
      const answer = contract(await agent.callTool({ name: 'echo', arguments: { message, idempotency_key: key } }));
      expect(answer).toMatchObject({ outcome: 'failed', retryable: true, error: { code: 'UPSTREAM_CREDENTIAL_UNAVAILABLE' } });
      expect(answer.error!.message).toMatch(
        /could not be read from Secrets Manager: ResourceNotFoundException.*nothing was sent\. Call again with the same key\./,
      );
      expect(echoes(message)).toHaveLength(0);
      // A read passed through is refused as a read is (`CODE: message`), and may be called again.
      const read = (await agent.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })) as {
        isError?: boolean;
        content: Array<{ type: string; text?: string }>;
      };
      expect(read.isError).toBe(true);
      expect(read.content).toHaveLength(1);
      expect(read.content[0]!.text).toMatch(
        /^UPSTREAM_CREDENTIAL_UNAVAILABLE: .*could not be read from Secrets Manager.*A read may be called again\.$/,
      );

      // The secret restored: a failed read was not kept, and the key was left free.
      secrets[arn] = credentialsJson;
      // (Its first call opens the connection for the credential: under load it may answer unknown first.)
      let outcome = '';
      for (let attempt = 0; attempt < 60 && outcome !== 'succeeded'; attempt++) {
        outcome = contract(await agent.callTool({ name: 'echo', arguments: { message, idempotency_key: key } })).outcome;
        if (outcome !== 'succeeded') await new Promise((resolve) => setTimeout(resolve, 250));
      }
      await agent.close();
      expect(outcome).toBe('succeeded');
      expect(echoes(message)).toHaveLength(1);
    } finally {
      closeDynamoDbClient(services.doc);
    }
  });
});
