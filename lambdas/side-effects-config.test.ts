import { describe, expect, it } from 'vitest';
import { loadConfig, loadWorkerConfig } from './config';
import { ConfigError } from './env-var';
import { loadReferenceConfig } from '../reference/config';
import { receivesWithinBudget } from './core/outbox-budget';

const base = {
  TABLE_NAME: 'records',
  OPERATION_ID_SECRET: 'x'.repeat(32),
  AUTH_MODE: 'oidc',
  AUTH_ISSUER: 'https://issuer.example',
  AUTH_AUDIENCE: 'mcp',
  AUTH_JWKS_URL: 'https://issuer.example/jwks.json',
};

describe('side-effect settings', () => {
  it('defaults: a 3 s downstream timeout, a 5 s reconciler period, 8 checks before review, a 24 h delivery budget and receives for it, no queue', () => {
    const { sideEffects } = loadConfig(base);
    expect(sideEffects).toMatchObject({
      downstreamTimeoutMs: 3000,
      reconcileIntervalMs: 5000,
      reconcileMaxAttempts: 8,
      outboxDeliveryBudgetMs: 24 * 3600_000,
      outboxMaxReceiveCount: receivesWithinBudget(24 * 3600_000),
      outboxEnabled: true,
    });
    for (const url of ['sqsEndpoint', 'outboxQueueUrl', 'outboxDeadLetterQueueUrl'] as const) expect(sideEffects[url]).toBeUndefined();
  });

  it('the reference endpoint reads its own settings: SES email by default, no downstream URLs, the sandbox table beside the service table', () => {
    expect(loadReferenceConfig(base)).toEqual({
      emailMode: 'ses',
      emailFrom: 'agent@example.com',
      downstreamTimeoutMs: 3000,
      sandboxEnabled: false,
      sandboxTableName: 'records-sandbox',
    });
    const config = loadReferenceConfig({
      ...base,
      PAYMENTS_URL: 'https://pay.example/',
      TICKETS_URL: 'https://tickets.example',
      MAILBOX_URL: 'http://127.0.0.1:3000/sandbox/mailbox',
      EMAIL_MODE: 'sandbox',
      EMAIL_FROM: 'noreply@shop.example',
      SANDBOX_ENABLED: 'true',
      SANDBOX_TABLE_NAME: 'demo-sandbox',
    });
    expect(config).toMatchObject({
      paymentsUrl: 'https://pay.example',
      ticketsUrl: 'https://tickets.example',
      mailboxUrl: 'http://127.0.0.1:3000/sandbox/mailbox',
      emailMode: 'sandbox',
      emailFrom: 'noreply@shop.example',
      sandboxEnabled: true,
      sandboxTableName: 'demo-sandbox',
    });
  });

  it("a team endpoint's settings carry nothing of the reference endpoint", () => {
    const config = loadConfig({ ...base, PAYMENTS_URL: 'https://pay.example', EMAIL_MODE: 'sandbox', SANDBOX_ENABLED: 'true' });
    expect(JSON.stringify(config)).not.toMatch(/pay\.example|payments|mailbox|sandbox|email/i);
  });

  it('reads every key', () => {
    const config = loadConfig({
      ...base,
      SQS_ENDPOINT: 'http://127.0.0.1:4566',
      OUTBOX_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/outbox',
      DOWNSTREAM_TIMEOUT_MS: '1500',
      RECONCILE_INTERVAL_MS: '200',
      RECONCILE_MAX_ATTEMPTS: '2',
      OUTBOX_DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/outbox-dlq',
      OUTBOX_DELIVERY_BUDGET_SECONDS: '3600',
      OUTBOX_MAX_RECEIVE_COUNT: '30',
      OUTBOX: 'off',
    });
    expect(config.sideEffects).toEqual({
      sqsEndpoint: 'http://127.0.0.1:4566',
      outboxQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/outbox',
      outboxEnabled: false,
      downstreamTimeoutMs: 1500,
      reconcileIntervalMs: 200,
      reconcileMaxAttempts: 2,
      outboxDeadLetterQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/outbox-dlq',
      outboxDeliveryBudgetMs: 3600_000,
      outboxMaxReceiveCount: 30,
    });
  });

  it('the worker functions read the table, queue and downstream settings only: no issuer, no operation-id secret', async () => {
    const config = loadWorkerConfig({ TABLE_NAME: 'records', OUTBOX_QUEUE_URL: 'https://sqs.example/q' });
    expect(config.sideEffects.outboxQueueUrl).toBe('https://sqs.example/q');
    expect(Object.keys(config).sort()).toEqual(['dynamodbEndpoint', 'sideEffects', 'tableName']);
    expect(() => loadConfig({ TABLE_NAME: 'records' })).toThrow(ConfigError);
  });

  it('the sandbox function needs only its table', () => {
    expect(loadReferenceConfig({ SANDBOX_TABLE_NAME: 'demo-sandbox' })).toMatchObject({
      sandboxTableName: 'demo-sandbox',
      downstreamTimeoutMs: 3000,
    });
    expect(() => loadReferenceConfig({})).toThrow(/SANDBOX_TABLE_NAME/);
  });

  it.each([
    ['EMAIL_MODE', 'smtp'],
    ['EMAIL_FROM', 'not an address'],
    ['DOWNSTREAM_TIMEOUT_MS', '0'],
    ['DOWNSTREAM_TIMEOUT_MS', 'soon'],
    ['RECONCILE_INTERVAL_MS', '-5'],
    ['RECONCILE_MAX_ATTEMPTS', '0'],
    ['RECONCILE_MAX_ATTEMPTS', 'many'],
    ['OUTBOX_DELIVERY_BUDGET_SECONDS', String(14 * 24 * 3600)],
    ['OUTBOX_DELIVERY_BUDGET_SECONDS', 'a day'],
    ['PAYMENTS_URL', 'ftp://pay.example'],
  ])('refuses %s=%s at start, naming it', (name, value) => {
    const load = (env: Record<string, string>) => {
      loadConfig(env);
      loadReferenceConfig(env);
    };
    expect(() => load({ ...base, [name]: value })).toThrow(ConfigError);
    expect(() => load({ ...base, [name]: value })).toThrow(name);
  });
});
