import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Context, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { tools } from '../../examples/cdk-app/tools';
import { consumerLambdaHandler } from '../../lambdas/functions/consumer-endpoint';
import { encodeMessageBody } from '../../lambdas/outbox/publisher';
import { startLocalStack, type LocalStack } from '../support/local-stack';
import { newKey } from '../support/engine';
import { callWrite, connectClient } from '../support/mcp';
import { sqsEvent } from '../support/side-effects';

/**
 * A team's own event type, end to end: its tool (examples/cdk-app/tools.ts) commits a `room.announce` event, and the
 * consumer Lambda handler of its endpoint, built from its deliveries module (examples/cdk-app/deliveries.ts) and
 * configured by the environment only, posts it to the team's chat (a real HTTP server here) once.
 */
let stack: LocalStack;
let client: Client;
let chat: Server;
const posts: { key: string | undefined; body: string }[] = [];
const context = { getRemainingTimeInMillis: () => 60_000 } as Context;

beforeAll(async () => {
  chat = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      posts.push({ key: request.headers['idempotency-key'] as string | undefined, body });
      response.writeHead(200).end('{}');
    });
  });
  await new Promise<void>((resolve) => chat.listen(0, '127.0.0.1', resolve));
  stack = await startLocalStack({ tools, workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false } });
  client = await connectClient(stack, 'tenant-rooms');
  const { env } = stack;
  // What IdempotentMcpEndpoint gives its consumer: the endpoint's settings, and the team's own.
  for (const [name, value] of Object.entries({
    AWS_LAMBDA_FUNCTION_NAME: 'team-consumer',
    TABLE_NAME: env.TABLE_NAME,
    DYNAMODB_ENDPOINT: env.DYNAMODB_ENDPOINT,
    SQS_ENDPOINT: env.SQS_ENDPOINT,
    OUTBOX_QUEUE_URL: env.OUTBOX_QUEUE_URL,
    ROOMS_CHAT_WEBHOOK: `http://127.0.0.1:${(chat.address() as AddressInfo).port}/hooks/rooms`,
    AUTH_MODE: undefined,
    OPERATION_ID_SECRET: undefined,
  }))
    vi.stubEnv(name, value);
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await client?.close();
  await stack?.stop();
  await new Promise((resolve) => chat?.close(resolve));
});

it("delivers a team's event type with the team's handler, once, however often the queue hands it over", async () => {
  const { outcome, result } = await callWrite<{ event_id: string }>(client, 'rooms.announce', {
    idempotency_key: newKey(),
    reservation_id: 'res_1',
    text: 'berlin-3 is booked at 10:00',
  });
  expect(outcome).toBe('succeeded');
  const eventId = result!.event_id;
  const stored = await stack.services.outbox.getEvent(eventId);
  expect(stored).toMatchObject({ status: 'PENDING', message: { type: 'room.announce' } });

  const consumer = consumerLambdaHandler(await import('../../examples/cdk-app/deliveries')) as unknown as (
    event: SQSEvent,
    context: Context,
  ) => Promise<{ batchItemFailures: unknown[] }>;
  const body = encodeMessageBody(stored!.message);
  // Two copies in one batch, then a redelivery.
  expect((await consumer(sqsEvent([body, body]), context)).batchItemFailures).toEqual([]);
  expect((await consumer(sqsEvent([body], 2), context)).batchItemFailures).toEqual([]);

  expect(posts).toEqual([{ key: eventId, body: JSON.stringify({ text: 'berlin-3 is booked at 10:00' }) }]);
  expect(await stack.services.outbox.getEvent(eventId)).toMatchObject({ status: 'DELIVERED' });
});
