import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { ConfigError } from './env-var';

const base = { TABLE_NAME: 'records', OPERATION_ID_SECRET: 'x'.repeat(32) };
const oidc = {
  ...base,
  AUTH_MODE: 'oidc',
  AUTH_ISSUER: 'https://issuer.example',
  AUTH_AUDIENCE: 'mcp',
  AUTH_JWKS_URL: 'https://issuer.example/.well-known/jwks.json',
};

describe('loadConfig', () => {
  it('reads a deployed configuration, with the documented defaults', () => {
    const config = loadConfig(oidc);
    expect(config).toMatchObject({
      tableName: 'records',
      auth: { mode: 'oidc', issuer: 'https://issuer.example', audience: 'mcp', tenantClaim: 'tenant' },
      allowedOrigins: [],
    });
    expect(config.dynamodbEndpoint).toBeUndefined();
    expect(config.publicBaseUrl).toBeUndefined();
  });

  it('defaults to OIDC: a deployment without auth settings fails at start, it never runs open or on the dev issuer', () => {
    expect(() => loadConfig(base)).toThrow(ConfigError);
    expect(() => loadConfig({ ...oidc, AUTH_JWKS_URL: 'file:///etc/passwd' })).toThrow(/AUTH_JWKS_URL/);
    expect(() => loadConfig({ ...base, AUTH_MODE: 'none' })).toThrow(/AUTH_MODE/);
  });

  it('refuses the dev issuer on Lambda', () => {
    expect(loadConfig({ ...base, AUTH_MODE: 'dev' }).auth).toMatchObject({ mode: 'dev', devAuthDir: '.local/auth' });
    expect(() => loadConfig({ ...base, AUTH_MODE: 'dev', AWS_LAMBDA_FUNCTION_NAME: 'mcp' })).toThrow(/local use only/);
  });

  it('requires the table and a long enough operation-id secret', () => {
    expect(() => loadConfig({ ...oidc, TABLE_NAME: '' })).toThrow(/TABLE_NAME/);
    expect(() => loadConfig({ ...oidc, OPERATION_ID_SECRET: undefined })).toThrow(/OPERATION_ID_SECRET/);
    expect(() => loadConfig({ ...oidc, OPERATION_ID_SECRET: 'short' })).toThrow(/at least 32/);
  });

  it("deployed, takes the secret by ARN, to read from Secrets Manager (a stand-in's endpoint only when given)", () => {
    const deployed = { ...oidc, OPERATION_ID_SECRET: undefined, OPERATION_ID_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:x' };
    expect(loadConfig(deployed).operationIdSecret).toEqual({
      secretArn: 'arn:aws:secretsmanager:eu-west-1:1:secret:x',
      endpoint: undefined,
    });
    expect(loadConfig({ ...deployed, SECRETS_MANAGER_ENDPOINT: 'http://127.0.0.1:4566' }).operationIdSecret).toMatchObject({
      endpoint: 'http://127.0.0.1:4566',
    });
    expect(() => loadConfig({ ...deployed, SECRETS_MANAGER_ENDPOINT: 'not a url' })).toThrow(/SECRETS_MANAGER_ENDPOINT/);
    // A value set directly wins: local runs may carry both.
    expect(loadConfig({ ...deployed, OPERATION_ID_SECRET: 'k'.repeat(32) }).operationIdSecret).toEqual({ value: 'k'.repeat(32) });
  });

  it('parses the custom tenant claim, the origin list, the sandbox flag and the base URL', () => {
    const config = loadConfig({
      ...oidc,
      AUTH_TENANT_CLAIM: 'custom:tenant',
      ALLOWED_ORIGINS: ' https://app.example , https://admin.example/ ,',
      PUBLIC_BASE_URL: 'https://mcp.example/',
    });
    expect(config.auth.tenantClaim).toBe('custom:tenant');
    expect(config.allowedOrigins).toEqual(['https://app.example', 'https://admin.example']);
    expect(config.publicBaseUrl).toBe('https://mcp.example');
  });
});
