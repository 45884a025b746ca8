import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { tools } from '../../examples/cdk-app/tools';
import type { LocalStack } from '../support/local-stack';
import { newKey } from '../support/engine';
import { callWrite, connectClient, startTestStack } from '../support/mcp';

/**
 * A team's endpoint deployed without deliveries has no outbox: IdempotentMcpEndpoint sets OUTBOX=off. Its tools
 * still run; one that queues an effect is refused with the reason, before anything commits, instead of committing
 * an event no consumer would deliver and answering `queued`.
 */
let stack: LocalStack;
let client: Client;

beforeAll(async () => {
  stack = await startTestStack({
    tools,
    env: { OUTBOX: 'off' },
    workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false },
  });
  client = await connectClient(stack, 'tenant-rooms');
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

it('answers a tool that queues an effect with failed / OUTBOX_DISABLED, naming the event type, and replays that', async () => {
  const args = { idempotency_key: newKey(), reservation_id: 'res_1', text: 'berlin-3 is booked at 10:00' };
  const first = await callWrite(client, 'rooms.announce', args);
  expect(first).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'OUTBOX_DISABLED' } });
  expect(first.error!.message).toMatch(
    /no outbox, so rooms\.announce cannot queue a 'room\.announce' event: deploy it with a deliveries module/,
  );
  const again = await callWrite(client, 'rooms.announce', args);
  expect(again).toMatchObject({ outcome: 'failed', error: { code: 'OUTBOX_DISABLED' } });
  // Nothing was committed for the relay to send.
  expect(await stack.workers.relay.sweep()).toEqual({ sent: 0, resent: 0, failed: 0, abandoned: 0 });
});

it('runs the tools that queue nothing as usual', async () => {
  const reserved = await callWrite(client, 'rooms.reserve', {
    idempotency_key: newKey(),
    room: 'berlin-3',
    starts_at: '2026-12-04T10:00:00Z',
    minutes: 30,
  });
  expect(reserved.outcome).toBe('succeeded');
});
