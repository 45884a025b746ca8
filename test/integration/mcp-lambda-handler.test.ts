import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadDevIssuer, type DevIssuer } from '../../lambdas/auth/dev-issuer';
import { EnvVars, loadConfig } from '../../lambdas/config';
import { read } from '../../lambdas/env-var';
import { createLambdaHandler } from '../../lambdas/http/function-url';
import { createServices } from '../../lambdas/runtime/services';
import { createTestTable } from '../support/dynamodb';
import { newKey } from '../support/engine';
import * as clientsModule from '../support/fixture-clients-module';
import {
  FIXTURE_LIMIT_MINOR,
  fixturePaymentArgs,
  FixtureTool,
  fixtureTools,
  startFixtureDownstream,
  type FixtureDownstream,
} from '../support/fixture-tools';
import { orderArgs } from '../support/mcp';
import { startSecretsManager, type SecretsManagerStandIn } from '../support/secrets-manager';

/**
 * The deployed shape: Function URL events (payload 2.0) through the Lambda handler, with OIDC auth against a
 * JWKS served over HTTP and the tenant in a custom claim (as Cognito puts it). The toolkit's behaviour runs on the
 * fixture tools (and a team's module with `withClients`), counted at the fixture downstream and in the table; the
 * tests named after create_order and request_payment are about the reference endpoint's own function module.
 */
const DOMAIN = 'abcdefghijklmnop.lambda-url.eu-west-1.on.aws';
const ISSUER = 'https://issuer.test/pool';
const AUDIENCE = 'mcp-api';
const TENANT_CLAIM = 'custom:tenant';

let table: Awaited<ReturnType<typeof createTestTable>>;
let jwksServer: Server;
let keyDir: string;
let issuer: DevIssuer;
let handler: (
  event: APIGatewayProxyEventV2,
  context: Context,
) => Promise<{ statusCode: number; headers?: Record<string, unknown>; body: string; isBase64Encoded: boolean }>;
/** The same parts (the toolkit's Function URL handler) serving the fixture tools, over the fixture downstream that counts their effects. */
let fixtureHandler: typeof handler;
let downstream: FixtureDownstream;
let fixture: ReturnType<typeof fixtureTools>;
/** The table's records, read as the function's services read them. */
let store: ReturnType<typeof createServices>['store'];
const WRITE = FixtureTool.write;
const PAY = FixtureTool.payment;
let secrets: SecretsManagerStandIn;
const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:operation-ids-AbCdEf';
/** Invocations so far, and whether the key set's first GET came before any (the cold start reads it at init). */
let invocations = 0;
let firstKeySetGetBeforeAnyRequest: Promise<boolean>;

beforeAll(async () => {
  table = await createTestTable();
  keyDir = await mkdtemp(join(tmpdir(), 'lambda-jwks-'));
  issuer = await loadDevIssuer({ dir: keyDir, issuer: ISSUER, audience: AUDIENCE, tenantClaim: TENANT_CLAIM });
  let onFirstGet: (beforeAnyRequest: boolean) => void;
  firstKeySetGetBeforeAnyRequest = new Promise((resolve) => (onFirstGet = resolve));
  jwksServer = createServer((_req, res) => {
    onFirstGet(invocations === 0);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(issuer.jwks));
  });
  await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
  const { port } = jwksServer.address() as { port: number };

  secrets = await startSecretsManager({ [SECRET_ARN]: randomBytes(32).toString('hex') });

  // Stubbed, and restored after the file: other test files in this worker build local (dev-auth) stacks.
  const env: Record<string, string> = {
    AWS_LAMBDA_FUNCTION_NAME: 'mcp-test',
    TABLE_NAME: table.tableName,
    DYNAMODB_ENDPOINT: table.endpoint,
    AUTH_MODE: 'oidc',
    AUTH_ISSUER: ISSUER,
    AUTH_AUDIENCE: AUDIENCE,
    AUTH_JWKS_URL: `http://127.0.0.1:${port}/jwks.json`,
    AUTH_TENANT_CLAIM: TENANT_CLAIM,
    // As deployed: the ARN of the key, read with the SDK's Secrets Manager client (here from a stand-in).
    OPERATION_ID_SECRET_ARN: SECRET_ARN,
    SECRETS_MANAGER_ENDPOINT: secrets.endpoint,
    SANDBOX_ENABLED: 'false',
    // request_payment (and fixture_payment) run for a 2025-era client here; no payments provider is configured.
    CONFIRMATION_OPT_OUT_TOOLS: `request_payment,${FixtureTool.payment}`,
  };
  vi.stubEnv('OPERATION_ID_SECRET', undefined);
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  // The real module: services built once from the environment at import, as in a Lambda container.
  const counted =
    (h: typeof handler): typeof handler =>
    (event, context) => {
      invocations++;
      return h(event, context);
    };
  handler = counted((await import('../../reference/handlers/mcp')).handler as unknown as typeof handler);
  // The same parts with the fixture tools: the toolkit's behaviour, counted at their downstream.
  const config = loadConfig(process.env);
  const timeoutMs = read(process.env, EnvVars.downstreamTimeoutMs);
  downstream = await startFixtureDownstream({ holdMs: timeoutMs + 1000 });
  fixture = fixtureTools(downstream, timeoutMs);
  const services = createServices(config, { engine: { inProgressWaitMs: 100 } });
  store = services.store;
  fixtureHandler = counted(createLambdaHandler(services, { tools: fixture.tools }) as unknown as typeof handler);
});

afterAll(async () => {
  vi.unstubAllEnvs();
  await new Promise((resolve) => jwksServer?.close(resolve));
  await secrets?.stop();
  await downstream?.stop();
  await rm(keyDir, { recursive: true, force: true });
  await table?.drop();
});

function lambdaContext(remainingMs = 25_000) {
  const getRemainingTimeInMillis = vi.fn(() => remainingMs);
  return {
    context: { functionName: 'mcp-test', awsRequestId: randomUUID(), getRemainingTimeInMillis } as unknown as Context,
    getRemainingTimeInMillis,
  };
}

function functionUrlEvent(options: {
  method?: string;
  path?: string;
  body?: string;
  headers?: Record<string, string>;
  base64?: boolean;
}): APIGatewayProxyEventV2 {
  const method = options.method ?? 'POST';
  const path = options.path ?? '/mcp';
  const body = options.body;
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: {
      host: DOMAIN,
      'x-forwarded-proto': 'https',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
      ...options.headers,
    },
    requestContext: {
      accountId: 'anonymous',
      apiId: 'abcdefghijklmnop',
      domainName: DOMAIN,
      domainPrefix: 'abcdefghijklmnop',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '198.51.100.7', userAgent: 'test' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: new Date().toUTCString(),
      timeEpoch: Date.now(),
    },
    body: body === undefined ? undefined : options.base64 ? Buffer.from(body).toString('base64') : body,
    isBase64Encoded: Boolean(options.base64),
  } as APIGatewayProxyEventV2;
}

const rpc = (method: string, params?: unknown, id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

async function invoke(
  target: typeof handler,
  options: Parameters<typeof functionUrlEvent>[0] & { tenant?: string | null; token?: string },
  remainingMs?: number,
) {
  const token = options.token ?? (options.tenant === null ? undefined : await issuer.sign({ tenant: options.tenant ?? 'tenant-lambda' }));
  const headers = { ...(token ? { authorization: `Bearer ${token}` } : {}), ...options.headers };
  const { context, getRemainingTimeInMillis } = lambdaContext(remainingMs);
  const response = await target(functionUrlEvent({ ...options, headers }), context);
  const text = response.isBase64Encoded ? Buffer.from(response.body, 'base64').toString() : response.body;
  const header = (name: string) => {
    const value = response.headers?.[name] ?? response.headers?.[name.toLowerCase()];
    return value === undefined ? undefined : String(value);
  };
  return { status: response.statusCode, text, json: () => JSON.parse(text), header, getRemainingTimeInMillis };
}

const operationIdOf = (issued: { structuredContent: Record<string, unknown> }) =>
  (issued.structuredContent as { operation_id: string }).operation_id;

async function callTool(target: typeof handler, name: string, args: Record<string, unknown>, tenant = 'tenant-lambda') {
  const response = await invoke(target, { body: rpc('tools/call', { name, arguments: args }), tenant });
  expect(response.status).toBe(200);
  return response.json().result as { structuredContent: Record<string, unknown>; isError: boolean };
}

describe('Lambda handler (Function URL, payload 2.0)', () => {
  // First: nothing has invoked the function yet. Without the prefetch the key set would wait for a request.
  it("reads the issuer's key set at init, so that its first request does not wait for it", async () => {
    expect(await firstKeySetGetBeforeAnyRequest).toBe(true);
  });

  it('answers initialize and tools/list statelessly, without a session id', async () => {
    const init = await invoke(handler, {
      body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }),
    });
    expect(init.status).toBe(200);
    expect(init.json().result.serverInfo.name).toBe('idempotent-mcp');
    // What a client learns at initialize: it may call tools, and how to retry them (the server's instructions).
    expect(init.json().result).toMatchObject({
      capabilities: { tools: { listChanged: false } },
      instructions: expect.stringMatching(/idempotency_key/),
    });
    expect(init.header('mcp-session-id')).toBeUndefined();
    const list = await invoke(handler, { body: rpc('tools/list') });
    expect(list.json().result.tools.map((t: { name: string }) => t.name)).toContain('create_order');
  });

  it('create_order: succeeded, replayed, conflict and rejected, with the tenant from the custom claim', async () => {
    const key = newKey();
    const first = await callTool(handler, 'create_order', orderArgs(key), 'tenant-claim-1');
    expect(first.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    const again = await callTool(handler, 'create_order', orderArgs(key), 'tenant-claim-1');
    expect(again.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.structuredContent.result });
    const conflict = await callTool(handler, 'create_order', orderArgs(key, { currency: 'USD' }), 'tenant-claim-1');
    expect(conflict).toMatchObject({ isError: true, structuredContent: { outcome: 'conflict' } });
    const rejected = await callTool(handler, 'create_order', orderArgs(key, { items: [] }), 'tenant-claim-1');
    expect(rejected).toMatchObject({ isError: true, structuredContent: { outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS' } } });

    const orderId = (first.structuredContent.result as { order_id: string }).order_id;
    const mine = await callTool(handler, 'get_order', { order_id: orderId }, 'tenant-claim-1');
    expect(mine.isError).toBeFalsy();
    const theirs = await callTool(handler, 'get_order', { order_id: orderId }, 'tenant-claim-2');
    expect(theirs.isError).toBe(true);
  });

  it('a write tool: succeeded, replayed, conflict and rejected, with the tenant from the custom claim; one booking, one record', async () => {
    const key = newKey();
    const args = { idempotency_key: key, note: 'claimed' };
    const first = await callTool(fixtureHandler, WRITE, args, 'tenant-claim-1');
    expect(first.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    const again = await callTool(fixtureHandler, WRITE, args, 'tenant-claim-1');
    expect(again.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.structuredContent.result });
    const conflict = await callTool(fixtureHandler, WRITE, { ...args, note: 'other words' }, 'tenant-claim-1');
    expect(conflict).toMatchObject({ isError: true, structuredContent: { outcome: 'conflict' } });
    const rejected = await callTool(fixtureHandler, WRITE, { ...args, note: '' }, 'tenant-claim-1');
    expect(rejected).toMatchObject({ isError: true, structuredContent: { outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS' } } });
    // One request reached the downstream, under the claim's tenant; the one record, under that tenant, holds its booking.
    const booked = first.structuredContent.result as { booking_id: string };
    expect(downstream.calls(key)).toBe(1);
    expect(downstream.bookings(key)).toEqual([
      expect.objectContaining({ tenant: 'tenant-claim-1', booking_id: booked.booking_id, payload: { note: 'claimed' } }),
    ]);
    expect(await store.get({ tenant: 'tenant-claim-1', tool: WRITE, idempotencyKey: key })).toMatchObject({
      status: 'SUCCEEDED',
      result: booked,
    });
    // The same key under another tenant's token is that tenant's own operation.
    expect((await callTool(fixtureHandler, WRITE, args, 'tenant-claim-2')).structuredContent).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
    });
    expect(
      downstream
        .bookings(key)
        .map((b) => b.tenant)
        .sort(),
    ).toEqual(['tenant-claim-1', 'tenant-claim-2']);
  });

  it('failed, unknown and in_progress through the handler', async () => {
    // The downstream refuses an amount above its limit (HTTP 422): failed, nothing booked.
    const id = operationIdOf(await callTool(fixtureHandler, 'issue_operation_id', { tool: PAY }));
    const failed = await callTool(fixtureHandler, PAY, fixturePaymentArgs(id, { amount_minor: FIXTURE_LIMIT_MINOR + 1 }));
    expect(failed).toMatchObject({ isError: true, structuredContent: { outcome: 'failed', retryable: false } });
    expect([downstream.calls(id), downstream.bookings(id).length]).toEqual([1, 0]);
    // The downstream fails with HTTP 500: the outcome is unknown.
    const uncertain = newKey();
    downstream.arm({ mode: 'fail-before-commit' });
    const unknown = await callTool(fixtureHandler, WRITE, { idempotency_key: uncertain, note: 'n' });
    expect(unknown).toMatchObject({ isError: true, structuredContent: { outcome: 'unknown', retryable: true } });
    expect(downstream.calls(uncertain)).toBe(1);

    const key = newKey();
    const held = downstream.hold(key);
    const first = callTool(fixtureHandler, WRITE, { idempotency_key: key, note: 'n' });
    await held.entered;
    const duplicate = await callTool(fixtureHandler, WRITE, { idempotency_key: key, note: 'n' });
    expect(duplicate).toMatchObject({ isError: true, structuredContent: { outcome: 'in_progress', retryable: true } });
    held.release();
    expect((await first).structuredContent).toMatchObject({ outcome: 'succeeded' });
    expect([downstream.calls(key), downstream.bookings(key).length]).toEqual([1, 1]);
  });

  it('reads the operation-id key from Secrets Manager on first use only, once, with a signed request', async () => {
    // The tests above ran create_order and more through this container's services: none needed the key.
    const handlerServices = createServices(loadConfig(process.env));
    const fresh = createLambdaHandler(handlerServices, { tools: fixture.tools }) as unknown as typeof handler;
    const before = secrets.requests.length;
    expect(await callTool(fresh, WRITE, { idempotency_key: newKey(), note: 'n' })).toMatchObject({
      structuredContent: { outcome: 'succeeded' },
    });
    expect(secrets.requests.length).toBe(before);

    const id = operationIdOf(await callTool(fresh, 'issue_operation_id', { tool: PAY }));
    expect(await callTool(fresh, PAY, fixturePaymentArgs(id))).toMatchObject({
      structuredContent: { outcome: 'succeeded', replayed: false },
    });
    expect(secrets.requests.slice(before)).toEqual([{ secretId: SECRET_ARN, signed: true }]);
    // Another container reading the same secret accepts the id: the key is the secret's, not the process's.
    expect(await callTool(fixtureHandler, PAY, fixturePaymentArgs(id))).toMatchObject({
      structuredContent: { outcome: 'succeeded', replayed: true },
    });
    expect([downstream.calls(id), downstream.bookings(id).length]).toEqual([1, 1]);
  });

  it('while the key cannot be read: operation-id calls say retry, nothing runs, and the next call reads again', async () => {
    const fresh = createLambdaHandler(createServices(loadConfig(process.env)), { tools: fixture.tools }) as unknown as typeof handler;
    const id = operationIdOf(await callTool(fixtureHandler, 'issue_operation_id', { tool: PAY }));
    secrets.failNext = Number.POSITIVE_INFINITY;
    try {
      const write = await callTool(fresh, PAY, fixturePaymentArgs(id));
      expect(write).toMatchObject({
        isError: true,
        structuredContent: { outcome: 'failed', retryable: true, replayed: false, error: { code: 'TRANSIENT_FAILURE' } },
      });
      expect(downstream.calls(id)).toBe(0);
      const issue = (await callTool(fresh, 'issue_operation_id', { tool: PAY })) as unknown as {
        isError: boolean;
        content: Array<{ text: string }>;
      };
      expect(issue.isError).toBe(true);
      expect(issue.content[0]!.text).toMatch(/^TRANSIENT_FAILURE: /);
    } finally {
      secrets.failNext = 0;
    }
    expect(await callTool(fresh, PAY, fixturePaymentArgs(id))).toMatchObject({
      structuredContent: { outcome: 'succeeded', replayed: false },
    });
    expect([downstream.calls(id), downstream.bookings(id).length]).toEqual([1, 1]);
  });

  it("gives request_payment the reference endpoint's payments client, configured from the environment", async () => {
    const issued = await callTool(handler, 'issue_operation_id', { tool: 'request_payment' });
    const operationId = (issued.structuredContent as { operation_id: string }).operation_id;
    const paid = await callTool(handler, 'request_payment', {
      operation_id: operationId,
      amount_minor: 700,
      currency: 'EUR',
      payee_id: 'payee-1',
    });
    // The client exists and reads PAYMENTS_URL, which is unset: nothing was sent, and the key is free for a retry.
    expect(paid).toMatchObject({ isError: true, structuredContent: { retryable: true, error: { code: 'DOWNSTREAM_NOT_CONFIGURED' } } });
  });

  it("takes the clients of a team's tools module from its `withClients` export, as the generated entry passes the module", async () => {
    const { mcpLambdaHandler } = await import('../../lambdas/functions/endpoint');
    // The module's `withClients` builds the downstream's client from the function's environment at the cold start.
    vi.stubEnv('FIXTURE_DOWNSTREAM_URL', downstream.url);
    const call = async (module: Parameters<typeof mcpLambdaHandler>[0]) => {
      const key = newKey();
      const answer = await callTool(mcpLambdaHandler(module) as unknown as typeof handler, clientsModule.CLIENT_WRITE, {
        idempotency_key: key,
        note: 'n',
      });
      return { key, answer, record: await store.get({ tenant: 'tenant-lambda', tool: clientsModule.CLIENT_WRITE, idempotencyKey: key }) };
    };
    // With the module's clients: the tool books through the client, once; the record holds that booking.
    const served = await call(clientsModule);
    expect(served.answer).toMatchObject({ isError: false, structuredContent: { outcome: 'succeeded', replayed: false } });
    const [booking] = downstream.bookings(served.key);
    expect([downstream.calls(served.key), downstream.bookings(served.key).length]).toEqual([1, 1]);
    expect(served.answer.structuredContent.result).toEqual({ booking_id: booking!.booking_id, key: served.key });
    expect(served.record).toMatchObject({ status: 'SUCCEEDED', result: { booking_id: booking!.booking_id } });
    // Without them the tool has no client: its execution throws, which the engine cannot tell from a crash after the
    // effect, so the outcome is `unknown` (to be verified), never a guess; nothing reached the downstream.
    const bare = await call({ tools: clientsModule.tools });
    expect(bare.answer).toMatchObject({ structuredContent: { outcome: 'unknown', error: { code: 'OUTCOME_UNKNOWN' } } });
    expect(downstream.calls(bare.key)).toBe(0);
    expect(bare.record).toMatchObject({ status: 'UNKNOWN' });
    // `withClients` as a second argument (the old form, bundled without a type check) would serve the tools without
    // their clients, every call `unknown`: it fails the cold start instead, saying where `withClients` goes.
    const oldForm = mcpLambdaHandler as unknown as (module: object, withClients: unknown) => unknown;
    expect(() => oldForm({ tools: clientsModule.tools }, clientsModule.withClients)).toThrow(
      /^mcpLambdaHandler takes one argument, the tools module; put withClients in it: mcpLambdaHandler\(\{ tools, withClients \}\)$/,
    );
  });

  it("bounds the execution by the invocation's remaining time", async () => {
    const key = newKey();
    const call = await invoke(fixtureHandler, { body: rpc('tools/call', { name: WRITE, arguments: { idempotency_key: key, note: 'n' } }) });
    expect(call.json().result.structuredContent.outcome).toBe('succeeded');
    expect(call.getRemainingTimeInMillis).toHaveBeenCalled();
    expect(downstream.bookings(key)).toHaveLength(1);
  });

  it('accepts a base64-encoded body, as Function URLs may deliver it', async () => {
    const key = newKey();
    const response = await invoke(fixtureHandler, {
      body: rpc('tools/call', { name: WRITE, arguments: { idempotency_key: key, note: 'encoded' } }),
      base64: true,
    });
    expect(response.json().result.structuredContent.outcome).toBe('succeeded');
    expect(downstream.bookings(key)).toEqual([expect.objectContaining({ payload: { note: 'encoded' } })]);
  });

  it('401 with WWW-Authenticate naming the metadata at the function URL; wrong issuer or audience refused', async () => {
    const none = await invoke(handler, { body: rpc('tools/list'), tenant: null });
    expect(none.status).toBe(401);
    expect(none.header('www-authenticate')).toBe(`Bearer resource_metadata="https://${DOMAIN}/.well-known/oauth-protected-resource"`);

    const otherKeys = await mkdtemp(join(tmpdir(), 'other-issuer-'));
    try {
      for (const [iss, aud] of [
        ['https://evil.test', AUDIENCE],
        [ISSUER, 'another-api'],
      ] as const) {
        const stranger = await loadDevIssuer({ dir: otherKeys, issuer: iss, audience: aud, tenantClaim: TENANT_CLAIM });
        const response = await invoke(handler, { body: rpc('tools/list'), token: await stranger.sign({ tenant: 'tenant-lambda' }) });
        expect(response.status).toBe(401);
        expect(response.header('www-authenticate')).toContain('error="invalid_token"');
      }
      // Right issuer and audience but signed by another key.
      const forger = await loadDevIssuer({ dir: otherKeys, issuer: ISSUER, audience: AUDIENCE, tenantClaim: TENANT_CLAIM });
      const forged = await invoke(handler, { body: rpc('tools/list'), token: await forger.sign({ tenant: 'tenant-lambda' }) });
      expect(forged.status).toBe(401);
    } finally {
      await rm(otherKeys, { recursive: true, force: true });
    }
  });

  it('serves the protected-resource metadata naming the issuer', async () => {
    const response = await invoke(handler, { method: 'GET', path: '/.well-known/oauth-protected-resource', tenant: null });
    expect(response.status).toBe(200);
    expect(response.json()).toEqual({
      resource: `https://${DOMAIN}/mcp`,
      authorization_servers: [ISSUER],
      bearer_methods_supported: ['header'],
      resource_name: expect.any(String),
    });
  });

  it('protocol hygiene through the handler: 400 parse error, -32601, 413, 403 Origin, no sandbox, no stack trace', async () => {
    const parse = await invoke(handler, { body: '{"jsonrpc":' });
    expect(parse.status).toBe(400);
    expect(parse.json()).toMatchObject({ error: { code: -32700 } });

    const unknown = await invoke(handler, { body: rpc('resources/teleport') });
    expect(unknown.json()).toMatchObject({ error: { code: -32601 } });

    const big = await invoke(handler, { body: rpc('tools/list', { pad: 'x'.repeat(1024 * 1024) }) });
    expect(big.status).toBe(413);

    const origin = await invoke(handler, { body: rpc('tools/list'), headers: { origin: 'https://attacker.example' } });
    expect(origin.status).toBe(403);

    const sandbox = await invoke(handler, { method: 'GET', path: '/sandbox/ledger', tenant: null });
    expect(sandbox.status).toBe(404);

    for (const response of [parse, unknown, big, origin, sandbox]) expect(response.text).not.toMatch(/\n\s+at |\.ts:\d+|node_modules/);
    const after = await invoke(handler, { body: rpc('tools/list') });
    expect(after.status).toBe(200);
  });
});
