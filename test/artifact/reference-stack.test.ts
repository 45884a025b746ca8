import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDynamoDbClient, ensureTable } from 'idempotent-mcp/dynamodb';
import { settingsFromContext } from '../../reference/cdk/context';
import { IdempotentMcpStack } from '../../reference/cdk/idempotent-mcp-stack';
import { createSandboxDownstreams } from '../../reference/sandbox/downstreams';
import { SandboxStore } from '../../reference/sandbox/sandbox-store';
import { LocalPerson } from '../../scripts/local-approver';
import { templateApp } from '../cdk/support';
import { orderArgs, rawToolCall, rawToolsList, type RawToolAnswer } from '../support/mcp';
import { paymentArgs } from '../support/side-effects';
import { LocalDeployment } from './local-deploy';
import { node22 } from '../support/node22';
import { artifactChecks, cfnLint } from './support';

/**
 * The reference stack as `cdk deploy` ships it, with every downstream set (payments and tickets at their providers,
 * email through SES): synthesized offline with every function bundled by the local esbuild, then deployed into a
 * local account (test/artifact/local-deploy.ts) and driven through the triggers its template declares. The
 * downstream providers are the sandbox's (run here, not deployed); SES is answered by the account's proxy.
 */
const STACK = 'ArtifactReference';
const SENDER = 'payments@example.com';

describe('the reference stack, deployed from cdk.out into a local account', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'artifact-reference-'));
  let deployment: LocalDeployment;
  let downstreams: ServerType;
  let sandbox: SandboxStore;
  let mcpUrl: string;
  let token: string;
  let tenant: string;
  let lint: Promise<string[]>;

  beforeAll(async () => {
    const node = node22();
    const dynamodbEndpoint = inject('dynamodbEndpoint');
    // The providers first: their address is a setting of the stack.
    const doc = createDynamoDbClient({ endpoint: dynamodbEndpoint });
    const sandboxTable = `artifact-sandbox-${randomUUID()}`;
    await ensureTable(doc, sandboxTable);
    sandbox = new SandboxStore(doc, sandboxTable);
    const providers = new Hono().route(
      '/sandbox',
      createSandboxDownstreams({ store: sandbox, clock: () => Date.now(), defaultHoldMs: 4_000, defaultSlowMs: 1_000 }),
    );
    downstreams = serve({ fetch: providers.fetch, hostname: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => downstreams.once('listening', () => resolve()));
    const base = `http://127.0.0.1:${(downstreams.address() as AddressInfo).port}/sandbox`;

    // Every function bundled; the template is checked by cfn-lint below (not by CDK's built-in validation too).
    const app = templateApp(
      { stackName: STACK, paymentsUrl: `${base}/payments`, ticketsUrl: `${base}/tickets`, emailFrom: SENDER },
      { bundle: true, outdir },
    );
    const settings = settingsFromContext(app.node);
    new IdempotentMcpStack(app, settings.stackName, settings.props);
    app.synth();
    lint = cfnLint(join(outdir, `${STACK}.template.json`));
    lint.catch(() => {});

    deployment = await LocalDeployment.deploy(outdir, STACK, { node, dynamodbEndpoint });
    const d = deployment.deployed;
    mcpUrl = String(d.resolve(d.template.Outputs!.McpUrl!.Value));
    const clientId = String(d.resolve(d.template.Outputs!.ClientId!.Value));
    const client = deployment.cognito.clients.get(clientId)!;
    token = await deployment.cognito.clientCredentials(clientId, client.secret!, String(d.resolve(d.template.Outputs!.TokenScope!.Value)));
    tenant = clientId;
  }, 300_000);

  afterAll(async () => {
    await deployment?.stop();
    downstreams?.close();
    rmSync(outdir, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>, round: { requestState?: string; inputResponses?: unknown } = {}) =>
    rawToolCall(mcpUrl, token, name, args, round);
  const structured = (answer: RawToolAnswer) => answer.structuredContent as Record<string, any>;

  it('answers tools/list through the Function URL with every tool, to a Cognito client-credentials token', async () => {
    const tools = (await rawToolsList(mcpUrl, token)).map((tool) => tool.name).sort();
    expect(tools).toEqual([
      'create_order',
      'create_ticket',
      'get_operation_status',
      'get_order',
      'issue_operation_id',
      'request_payment',
      'send_email',
    ]);
    const anonymous = await fetch(mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(anonymous.status).toBe(401);
  }, 120_000);

  it('runs each write tool once per key and replays it; reads answer alike twice', async () => {
    const orderKey = `order-${randomUUID()}`;
    const [order, orderAgain] = [await call('create_order', orderArgs(orderKey)), await call('create_order', orderArgs(orderKey))];
    expect(structured(order)).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(structured(orderAgain)).toMatchObject({ outcome: 'succeeded', replayed: true, result: structured(order).result });
    const orderId = structured(order).result.order_id as string;
    const [read, readAgain] = [await call('get_order', { order_id: orderId }), await call('get_order', { order_id: orderId })];
    expect(structured(read)).toMatchObject({ order_id: orderId });
    expect(structured(readAgain)).toEqual(structured(read));

    for (const [tool, args] of [
      ['send_email', { to: 'alice@example.org', subject: 'Receipt', body: 'Paid.' }],
      ['create_ticket', { title: 'Printer on fire', description: 'Third floor.', priority: 'high' }],
    ] as const) {
      const key = `${tool}-${randomUUID()}`;
      const first = await call(tool, { ...args, idempotency_key: key });
      const second = await call(tool, { ...args, idempotency_key: key });
      expect(structured(first), tool).toMatchObject({ outcome: 'succeeded', replayed: false, result: { status: 'queued' } });
      expect(structured(second), tool).toMatchObject({ outcome: 'succeeded', replayed: true, result: structured(first).result });
      const status = await call('get_operation_status', { tool, idempotency_key: key });
      expect(structured(status), tool).toMatchObject({ tool });
    }
  }, 120_000);

  it('pays once a signed-in person approved on the page; an unknown outcome is settled by the scheduled reconciler', async () => {
    const ids = [
      structured(await call('issue_operation_id', { tool: 'request_payment' })),
      structured(await call('issue_operation_id', { tool: 'request_payment' })),
    ];
    expect(ids[0]!.operation_id).not.toBe(ids[1]!.operation_id);
    const id = ids[0]!.operation_id as string;
    const first = await call('request_payment', paymentArgs(id));
    expect(first).toMatchObject({ resultType: 'input_required' });
    const link = (first.inputRequests as any).confirm.params.url as string;
    const pageBase = String(
      deployment.deployed.attributes.get(`${deployment.deployed.ofType('AWS::ApiGatewayV2::Api')[0]![0]}.ApiEndpoint`),
    );
    expect(link.startsWith(`${pageBase}/approvals/`)).toBe(true);

    // A person of the tenant, created by an administrator in the pool, signs in at the pool's login and approves.
    deployment.cognito.people.set('alice', { username: 'alice', password: 'Correct-Horse-9', attributes: { 'custom:tenant': tenant } });
    const person = new LocalPerson();
    const toSignIn = await person.request(link);
    expect(toSignIn.status).toBe(302);
    const authorize = new URL(toSignIn.headers.get('location')!);
    expect(authorize.origin).toBe(deployment.cognito.url);
    const form = await (await person.request(authorize.toString())).text();
    const hidden = Object.fromEntries([...form.matchAll(/name="(\w+)" value="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    const signedIn = await person.request(`${deployment.cognito.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...hidden, username: 'alice', password: 'Correct-Horse-9' }),
    });
    expect(signedIn.status).toBe(302);
    const page = await (await person.open(signedIn.headers.get('location')!)).text();
    expect(page).toContain('Pay 12.50 EUR to payee-7');
    expect((await person.decide(link, 'approve', page)).status).toBe(200);

    // The provider commits but answers after the function's downstream timeout: the outcome is unknown.
    await sandbox.armFault({ target: 'payments', mode: 'commit-then-timeout', times: 1 });
    const paid = await call('request_payment', paymentArgs(id), {
      requestState: first.requestState as string,
      inputResponses: { confirm: { action: 'accept' } },
    });
    expect(structured(paid)).toMatchObject({ outcome: 'unknown' });
    let settled: Record<string, any> = {};
    for (let run = 0; run < 6 && settled.outcome !== 'succeeded'; run++) {
      await deployment.advanceClock(5 * 60_000);
      await deployment.runSchedule(deployment.triggersOf('EventBridge schedule')[0]!.id);
      settled = structured(await call('request_payment', paymentArgs(id)));
    }
    expect(settled).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect((await sandbox.payments()).filter((p) => p.idempotency_key === id)).toHaveLength(1);
  }, 120_000);

  it('relays committed events from the stream to the queue; the consumer sends the email through SES once and gives a refused ticket up to the DLQ when its budget is spent', async () => {
    await sandbox.armFault({ target: 'tickets', mode: 'unavailable', times: 100 });
    const key = `late-ticket-${randomUUID()}`;
    expect(
      structured(await call('create_ticket', { title: 'Late', description: 'Tickets down', priority: 'low', idempotency_key: key })),
    ).toMatchObject({ outcome: 'succeeded' });

    const [streamMapping] = deployment.triggersOf('DynamoDB stream event source');
    const relayed = await deployment.pumpStream(streamMapping!.id);
    // The filter lets only outbox event INSERTs through: records, orders and approvals never wake the relay.
    expect(relayed.records).toBeGreaterThan(relayed.invoked);
    const [queueMapping] = deployment.triggersOf('SQS event source');
    const consumed = await deployment.pumpQueue(queueMapping!.id);
    expect(consumed.messages).toBeGreaterThanOrEqual(3); // the email and both tickets
    expect(consumed.failures).toBeGreaterThanOrEqual(1); // the tickets refused for now
    expect(deployment.account.emails).toEqual([expect.objectContaining({ from: SENDER, to: ['alice@example.org'], subject: 'Receipt' })]);

    // A day later the delivery budget is spent: the consumer moves the message to the dead-letter queue itself.
    await deployment.advanceClock(25 * 3600_000);
    const later = await deployment.pumpQueue(queueMapping!.id);
    expect(later.messages).toBeGreaterThanOrEqual(1);
    expect(later.failures).toBe(0);
    const dlqUrl = deployment.account.queueUrls.get(
      String(deployment.deployed.resolve(deployment.template.Outputs!.DeadLetterQueueUrl!.Value)),
    )!;
    const sqs = new SQSClient({
      endpoint: deployment.sqsEndpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'ops', secretAccessKey: 'ops' },
    });
    const dead = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10 }));
    sqs.destroy();
    expect((dead.Messages ?? []).map((m) => JSON.parse(m.Body!).tool)).toContain('create_ticket');
    expect(deployment.account.emails).toHaveLength(1);
  }, 120_000);

  artifactChecks(
    () => deployment,
    () => lint,
  );
});
