import { createDynamoDbClient, DynamoDbRecordMemos } from 'idempotent-mcp/dynamodb';
import { ConfigError, EnvVars, read, readSecretString, type Env } from 'idempotent-mcp/lambda';
import { GatewayEnvVars } from './config';
import { parseCredentials, staticCredentials, type CredentialSource, type CredentialsFile } from './credentials';
import { createGateway } from './create-gateway';
import { RecordListingMemo } from './listing-memo';

/**
 * Deployed: the credentials JSON (the file's format) in a Secrets Manager secret, read once per container on first
 * need; a failed read is not kept, so the next call reads again. The value never sits in the template or the
 * function's configuration, only its ARN.
 */
export function secretCredentials(secretArn: string, endpoint?: string): CredentialSource {
  let pending: Promise<CredentialsFile> | undefined;
  const file = () =>
    (pending ??= readSecretString({ secretArn, endpoint }, "the gateway's upstream credentials")
      .then((text) => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          throw new ConfigError(`the gateway's upstream credentials secret ${secretArn} is not JSON`);
        }
        return parseCredentials(json, `the secret ${secretArn}`);
      })
      .catch((err: unknown) => {
        pending = undefined;
        throw err;
      }));
  return {
    forTenant: async (tenant) => staticCredentials(await file()).forTenant(tenant),
    forListing: async () => staticCredentials(await file()).forListing(),
  };
}

/**
 * The gateway's tools as a tools module, for the Lambda functions IdempotentMcpGateway deploys: the policy (checked
 * at synth, bundled as it is), the upstream's URL and the credentials secret from the environment the construct
 * sets. The upstream's `tools/list` comes from the table when a cold start of the last hour kept it for this policy
 * and upstream (RecordListingMemo); else the cold start reads the secret and the upstream's list (a policy that does
 * not fit the upstream fails it with its mistakes, before any call is served) and keeps the list. So a cold start
 * with a kept list reaches neither the upstream nor Secrets Manager: replays and `get_operation_status` are served
 * while either is down, and the first call that needs the upstream reads the secret. Only a function with
 * `GATEWAY_KEEP_LISTING` (the MCP function) keeps a list it read; the reconciler reads a kept list and keeps none.
 */
export async function gatewayToolsModule(policy: unknown, env: Env = process.env) {
  const url = read(env, GatewayEnvVars.upstreamUrl);
  const secretArn = read(env, GatewayEnvVars.credentialsSecretArn);
  const tableName = read(env, EnvVars.tableName);
  if (!url) throw new ConfigError(`${GatewayEnvVars.upstreamUrl.name} must be set (the upstream's streamable-HTTP URL)`);
  if (!secretArn) throw new ConfigError(`${GatewayEnvVars.credentialsSecretArn.name} must be set (the gateway's upstream credentials)`);
  if (!tableName) throw new ConfigError(`${EnvVars.tableName.name} must be set`);
  // The records' own prefix (the construct sets the upstream's), as the functions' store has it.
  const keyPrefix = read(env, EnvVars.tableKeyPrefix) || undefined;
  const memos = new DynamoDbRecordMemos({
    doc: createDynamoDbClient({ endpoint: read(env, EnvVars.dynamodbEndpoint) }),
    tableName,
    keyPrefix,
  });
  const gateway = await createGateway({
    policy,
    upstream: { url },
    credentials: secretCredentials(secretArn, read(env, EnvVars.secretsManagerEndpoint)),
    table: { memos },
    // Only the MCP function keeps a listing it read; the reconciler reads a kept one and writes nothing of its own.
    listing: new RecordListingMemo(memos, { upstream: url, policy }, { readOnly: !read(env, GatewayEnvVars.keepListing) }),
  });
  return { tools: gateway.tools };
}
