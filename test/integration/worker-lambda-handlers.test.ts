import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { APIGatewayProxyEventV2, Context, DynamoDBStreamEvent, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Keys } from '../../lambdas/store/table-schema';
import { tools as demoTools } from '../../reference/tools';
import { newKey } from '../support/engine';
import * as clientsModule from '../support/fixture-clients-module';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient } from '../support/mcp';
import { armFault, issueOperationId, operationStatus, sandboxLedger } from '../support/side-effects';

/**
 * The deployed entry points themselves, imported as Lambda imports them, configured only by the environment,
 * against the local table, queue and downstreams: stream -> relay -> queue -> consumer -> downstream. The toolkit's
 * (lambdas/functions/*: the relay, and the consumer and reconciler factories a team's entries call) on the fixture
 * tools and on a team's module with `withClients` (test/support/fixture-clients-module.ts), counted at the fixture
 * downstream and in the table; the reference endpoint's own entries (reference/handlers/*: its
 * consumer, its reconciler building its payments client, its sandbox) on its demo tools, counted in its sandbox.
 */
let stack: FixtureStack;
let client: Client;
type Handler<E, R> = (event: E, context: Context) => Promise<R>;
type BatchHandler<E> = Handler<E, { batchItemFailures: { itemIdentifier: string }[] }>;
type ReconcilerHandler = Handler<unknown, { unknown: number; needsReview: number; found: number; deferred: number }>;
let relay: BatchHandler<DynamoDBStreamEvent>;
/** The toolkit's factories on the fixture tools' module, as a team's generated entries call them. */
let consumer: BatchHandler<SQSEvent>;
let reconciler: ReconcilerHandler;
/** The reference endpoint's entries. */
let referenceConsumer: BatchHandler<SQSEvent>;
let referenceReconciler: ReconcilerHandler;
let sandbox: Handler<APIGatewayProxyEventV2, { statusCode: number; body: string }>;
const context = { getRemainingTimeInMillis: () => 60_000 } as Context;

/** The outbox event a tool call committed, as the table's stream hands it to the relay. */
async function streamInsert(eventId: string, sequence: string): Promise<DynamoDBStreamEvent> {
  const { Item } = await stack.services.doc.send(
    new GetCommand({ TableName: stack.config.tableName, Key: Keys.outboxEvent(eventId), ConsistentRead: true }),
  );
  return {
    Records: [{ eventName: 'INSERT', dynamodb: { NewImage: marshall(Item!, { removeUndefinedValues: true }), SequenceNumber: sequence } }],
  } as unknown as DynamoDBStreamEvent;
}

/** The queue's message of this event, as the SQS event source hands it to the consumer. */
async function queuedEvent(eventId: string): Promise<SQSEvent> {
  const { Messages } = await stack.workers.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: stack.queue.queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      MessageSystemAttributeNames: ['ApproximateReceiveCount'],
    }),
  );
  const message = Messages!.find((m) => m.Body?.includes(eventId))!;
  return {
    Records: [
      {
        messageId: message.MessageId,
        receiptHandle: message.ReceiptHandle,
        body: message.Body,
        attributes: { ApproximateReceiveCount: message.Attributes?.ApproximateReceiveCount ?? '1' },
        messageAttributes: {},
        eventSource: 'aws:sqs',
      },
    ],
  } as unknown as SQSEvent;
}

beforeAll(async () => {
  // Nothing runs in the background: the handlers do all the work here. The fixture tools and the demo tools side by
  // side; a lost payment answer waits out the downstream timeout (1 s here, 3 s by default).
  stack = await startFixtureStack({
    tools: [...demoTools, ...clientsModule.tools],
    env: { CONFIRMATION_OPT_OUT_TOOLS: `${FixtureTool.payment},request_payment`, DOWNSTREAM_TIMEOUT_MS: '1000' },
    workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false },
  });
  client = await connectClient(stack, 'tenant-lambda');
  // Only what the CDK stack gives these functions: no issuer, no operation-id secret (they serve no MCP requests).
  const { env } = stack;
  const deployed: Record<string, string | undefined> = {
    AWS_LAMBDA_FUNCTION_NAME: 'worker-test',
    TABLE_NAME: env.TABLE_NAME,
    DYNAMODB_ENDPOINT: env.DYNAMODB_ENDPOINT,
    SQS_ENDPOINT: env.SQS_ENDPOINT,
    OUTBOX_QUEUE_URL: env.OUTBOX_QUEUE_URL,
    OUTBOX_MAX_RECEIVE_COUNT: env.OUTBOX_MAX_RECEIVE_COUNT,
    PAYMENTS_URL: env.PAYMENTS_URL,
    TICKETS_URL: env.TICKETS_URL,
    MAILBOX_URL: env.MAILBOX_URL,
    EMAIL_MODE: 'sandbox',
    SANDBOX_TABLE_NAME: stack.referenceConfig.sandboxTableName,
    AUTH_MODE: undefined,
    OPERATION_ID_SECRET: undefined,
  };
  for (const [name, value] of Object.entries(deployed)) vi.stubEnv(name, value);
  relay = (await import('../../lambdas/functions/relay')).handler as unknown as typeof relay;
  const { consumerLambdaHandler } = await import('../../lambdas/functions/consumer-endpoint');
  const { reconcilerLambdaHandler } = await import('../../lambdas/functions/reconciler-endpoint');
  consumer = consumerLambdaHandler({ deliveries: stack.deliveries }) as unknown as typeof consumer;
  const fixtureOnly = stack.tools.filter((tool) => (Object.values(FixtureTool) as string[]).includes(tool.name));
  reconciler = reconcilerLambdaHandler({ tools: fixtureOnly }) as unknown as typeof reconciler;
  referenceConsumer = (await import('../../reference/handlers/consumer')).handler as unknown as typeof referenceConsumer;
  referenceReconciler = (await import('../../reference/handlers/reconciler')).handler as unknown as typeof referenceReconciler;
  sandbox = (await import('../../reference/handlers/sandbox')).handler as unknown as typeof sandbox;
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await client?.close();
  await stack?.stop();
});

describe('the worker Lambda handlers', () => {
  it('relay (stream INSERT) -> queue -> consumer (SQS batch) delivers the email once; the reconciler runs', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, FixtureTool.notify, {
      idempotency_key: key,
      to: 'kay@example.com',
      text: 'Hello.',
    });
    const eventId = result!.event_id;
    expect(await relay(await streamInsert(eventId, '100'), context)).toEqual({ batchItemFailures: [] });

    const sqsEvent = await queuedEvent(eventId);
    expect(await consumer(sqsEvent, context)).toEqual({ batchItemFailures: [] });
    // The same message again (SQS delivered it twice): acknowledged, no second notification.
    expect(await consumer(sqsEvent, context)).toEqual({ batchItemFailures: [] });
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
    expect(stack.downstream.calls(eventId)).toBe(1);
    expect(await operationStatus(client, FixtureTool.notify, key)).toMatchObject({ delivery: { status: 'delivered' } });

    const report = await reconciler({}, context);
    expect(report).toMatchObject({ unknown: 0, needsReview: 0 });
  });

  it("the reference endpoint's consumer function delivers a demo email once, to the mailbox its environment names", async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, 'send_email', {
      idempotency_key: key,
      to: 'kay@example.com',
      subject: 'From Lambda',
      body: 'Hello.',
    });
    const eventId = result!.event_id;
    expect(await relay(await streamInsert(eventId, '200'), context)).toEqual({ batchItemFailures: [] });
    const sqsEvent = await queuedEvent(eventId);
    expect(await referenceConsumer(sqsEvent, context)).toEqual({ batchItemFailures: [] });
    expect(await referenceConsumer(sqsEvent, context)).toEqual({ batchItemFailures: [] });
    expect((await sandboxLedger(stack)).emails.filter((e) => e.event_id === eventId)).toHaveLength(1);
  });

  it("the reconciler function settles a lost payment through request_payment's hook: it builds the payments client itself", async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    const args = { operation_id: operationId, amount_minor: 1900, currency: 'EUR', payee_id: 'payee-lambda' };
    await armFault(stack, { target: 'payments', mode: 'commit-then-timeout' });
    expect(await callWrite(client, 'request_payment', args)).toMatchObject({ outcome: 'unknown' });

    expect(await referenceReconciler({}, context)).toMatchObject({ found: 1 });
    const [payment] = (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === operationId);
    expect(await operationStatus(client, 'request_payment', operationId)).toMatchObject({
      status: 'succeeded',
      result: { payment_id: payment!.payment_id },
    });
  });

  it("a team's tools module hands its reconcile hooks its own clients through `withClients`; anything else is refused", async () => {
    const { reconcilerLambdaHandler } = await import('../../lambdas/functions/reconciler-endpoint');
    // A team's module whose tool and reconcile hook take the downstream's client from the services; its `withClients`
    // builds that client from the function's environment at the cold start: the generated entry passes the module.
    const module = clientsModule;
    vi.stubEnv('FIXTURE_DOWNSTREAM_URL', stack.downstream.url);
    vi.stubEnv('DOWNSTREAM_TIMEOUT_MS', '1000');
    const teamReconciler = reconcilerLambdaHandler(module) as unknown as ReconcilerHandler;
    const record = (key: string) => stack.services.store.get({ tenant: 'tenant-lambda', tool: module.CLIENT_WRITE, idempotencyKey: key });
    /** A call whose answer is lost after the downstream booked it: `unknown`, one booking under the key. */
    const lostAnswer = async (key: string) => {
      stack.downstream.arm({ mode: 'commit-then-timeout' });
      expect(await callWrite(client, module.CLIENT_WRITE, { idempotency_key: key, note: 'answer lost' })).toMatchObject({
        outcome: 'unknown',
      });
      expect(stack.downstream.bookings(key)).toHaveLength(1);
      expect(await record(key)).toMatchObject({ status: 'UNKNOWN' });
    };

    const key = newKey();
    await lostAnswer(key);
    expect(await teamReconciler({}, context)).toMatchObject({ found: 1 });
    // The hook asked the downstream through the module's client, and the record holds the one booking it found.
    expect(stack.downstream.lookups(key)).toBe(1);
    const [booking] = stack.downstream.bookings(key);
    expect(await record(key)).toMatchObject({ status: 'SUCCEEDED', result: { booking_id: booking!.booking_id, key } });
    expect([stack.downstream.calls(key), stack.downstream.bookings(key).length]).toEqual([1, 1]);

    // The same tools without `withClients`: the hook has no client, so nothing asks the downstream and the call stays
    // unknown (checked again later), never settled by a guess.
    const unserved = newKey();
    await lostAnswer(unserved);
    const clientless = reconcilerLambdaHandler({ tools: module.tools }) as unknown as ReconcilerHandler;
    expect(await clientless({}, context)).toMatchObject({ found: 0, deferred: 1 });
    expect(stack.downstream.lookups(unserved)).toBe(0);
    expect(await record(unserved)).toMatchObject({ status: 'UNKNOWN' });

    // A `withClients` that is not a function fails the cold start, saying why.
    expect(() => reconcilerLambdaHandler({ tools: module.tools, withClients: 'bookings' } as never)).toThrow(
      /exports `withClients`, but not as a function/,
    );
    // So does `withClients` as a second argument (the old form): the hooks would have no client, every record deferred.
    const oldForm = reconcilerLambdaHandler as unknown as (module: object, withClients: unknown) => unknown;
    expect(() => oldForm({ tools: module.tools }, module.withClients)).toThrow(
      /^reconcilerLambdaHandler takes one argument, the tools module; put withClients in it: reconcilerLambdaHandler\(\{ tools, withClients \}\)$/,
    );
  });

  it('the sandbox function serves the same routes through a Function URL event, from its own table only', async () => {
    const event = {
      version: '2.0',
      routeKey: '$default',
      rawPath: '/sandbox/ledger',
      rawQueryString: '',
      headers: { host: 'sandbox.lambda-url.eu-west-1.on.aws', 'x-forwarded-proto': 'https' },
      requestContext: {
        accountId: 'anonymous',
        apiId: 'sandbox',
        domainName: 'sandbox.lambda-url.eu-west-1.on.aws',
        domainPrefix: 'sandbox',
        http: { method: 'GET', path: '/sandbox/ledger', protocol: 'HTTP/1.1', sourceIp: '198.51.100.7', userAgent: 'test' },
        requestId: randomUUID(),
        routeKey: '$default',
        stage: '$default',
        time: new Date().toUTCString(),
        timeEpoch: Date.now(),
      },
      isBase64Encoded: false,
    } as APIGatewayProxyEventV2;
    const response = await sandbox(event, context);
    expect(response.statusCode).toBe(200);
    const ledger = JSON.parse(response.body) as Record<string, Array<{ event_id?: string }>>;
    expect(Object.keys(ledger).sort()).toEqual(['emails', 'payments', 'tickets']);
    // The same table as the local sandbox: the email the reference's consumer sent above is there.
    expect(ledger.emails!.length).toBeGreaterThanOrEqual(1);
  });
});
