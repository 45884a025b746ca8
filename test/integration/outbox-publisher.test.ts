import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logger } from '../../lambdas/observability/logger';
import { parseOutboxMessage, type OutboxMessage } from '../../lambdas/outbox/outbox-event';
import { SqsEventPublisher } from '../../lambdas/outbox/publisher';
import { createConsumerHandler } from '../../lambdas/runtime/worker-events';
import type { LocalStack } from '../support/local-stack';
import { newKey } from '../support/engine';
import { FIXTURE_NOTIFY_EVENT, FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient } from '../support/mcp';
import { operationStatus } from '../support/side-effects';

const TENANT = 'tenant-outbox-publisher';
/** Queues a notification on the outbox; the consumer books it at the fixture downstream under the event id (test/support/fixture-tools.ts). */
const NOTIFY = FixtureTool.notify;

/** Everything visible on the queue now (bounded: a few receives of up to ten). */
async function drain(stack: LocalStack): Promise<Message[]> {
  const all: Message[] = [];
  for (let i = 0; i < 5; i++) {
    const { Messages } = await stack.workers.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: stack.queue.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, AttributeNames: ['All'] }),
    );
    if (!Messages?.length) break;
    all.push(...Messages);
  }
  return all;
}

function sqsEvent(messages: Message[]): SQSEvent {
  return {
    Records: messages.map((m) => ({
      messageId: m.MessageId!,
      receiptHandle: m.ReceiptHandle!,
      body: m.Body!,
      attributes: {
        ApproximateReceiveCount: m.Attributes?.ApproximateReceiveCount ?? '1',
        SentTimestamp: '0',
        SenderId: 'test',
        ApproximateFirstReceiveTimestamp: '0',
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:local:000000000000:outbox',
      awsRegion: 'local',
    })),
  };
}

describe('what the queue accepts: every committed event gets onto it', () => {
  let stack: FixtureStack;
  let client: Client;

  beforeAll(async () => {
    stack = await startFixtureStack({ workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false } });
    client = await connectClient(stack, TENANT);
  });
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  });

  it('an email with characters SQS refuses in a raw body (U+FFFF, an emoji) is sent and delivered with its text intact', async () => {
    const texts = ['smile \u{1F600} please\n', 'odd \uFFFF character\n'];
    const sent: Array<{ key: string; eventId: string; text: string }> = [];
    for (const text of texts) {
      const key = newKey();
      const answer = await callWrite<{ event_id: string }>(client, NOTIFY, { idempotency_key: key, to: 'grace@example.com', text });
      expect(answer.outcome).toBe('succeeded');
      sent.push({ key, eventId: answer.result!.event_id, text });
    }
    expect(await stack.workers.relay.sweep()).toMatchObject({ sent: 2, failed: 0 });

    const messages = await drain(stack);
    expect(messages).toHaveLength(2);
    expect((await createConsumerHandler(stack.workers, logger)(sqsEvent(messages))).batchItemFailures).toEqual([]);
    // What the downstream booked, one per event, with the text as the tool was given it.
    for (const { key, eventId, text } of sent) {
      expect(stack.downstream.bookings(eventId).map((b) => b.payload)).toEqual([{ to: 'grace@example.com', text }]);
      expect((await operationStatus(client, NOTIFY, key)).delivery).toMatchObject({ status: 'delivered' });
    }
  });

  it('ten large events published together all reach the queue (a batch over the size limit would refuse every one)', async () => {
    const publisher = new SqsEventPublisher(stack.workers.sqs, stack.queue.queueUrl);
    // 50,000 three-byte characters: about 150 kB each, well within the single-message limit, 1.5 MB together.
    const body = '\u5B57'.repeat(50_000);
    const sent: OutboxMessage[] = Array.from({ length: 10 }, (_, i) => ({
      event_id: `evt_large-${i}-${newKey()}`,
      type: FIXTURE_NOTIFY_EVENT,
      tenant: TENANT,
      tool: NOTIFY,
      key_hash: 'hash',
      payload: { to: 'grace@example.com', text: `large ${i}: ${body}` },
      created_at: Date.now(),
    }));
    expect(await publisher.publish(sent)).toEqual({ failed: [] });
    const ids = new Set(sent.map((m) => m.event_id));
    const received = (await drain(stack)).map((m) => parseOutboxMessage(m.Body!)).filter((m) => ids.has(m.event_id));
    expect(received.sort((a, b) => a.event_id.localeCompare(b.event_id))).toEqual(
      sent.sort((a, b) => a.event_id.localeCompare(b.event_id)),
    );
  });
});
