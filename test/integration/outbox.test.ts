import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { spawn, type ChildProcess } from 'node:child_process';
import { childBundle } from '../support/child-bundle';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { PurgeQueueCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logger } from '../../lambdas/observability/logger';
import { createConsumerHandler, createRelayHandler } from '../../lambdas/runtime/worker-events';
import { createWorkers } from '../../lambdas/runtime/workers';
import { OutboxConsumer } from '../../lambdas/outbox/consumer';
import { OutboxDefaults, receivesWithinBudget } from '../../lambdas/core/outbox-budget';
import { ErrorCode, TransientToolError } from '../../lambdas/core/errors';
import type { OutboxStore } from '../../lambdas/outbox/outbox-store';
import type { ReconcileFinding } from '../../lambdas/core/reconcile';
import { Keys } from '../../lambdas/store/table-schema';
import { stopChild } from '../../lambdas/local/dynamodb-local-process';
import { manualClock, newKey, orderKey, storedItem } from '../support/engine';
import { FIXTURE_NOTIFY_EVENT, FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient } from '../support/mcp';
import { eventually, operationStatus, peekQueue, settledDelivery, sqsEvent } from '../support/side-effects';

const TENANT = 'tenant-outbox';
/** Queues a notification on the outbox; the consumer books it at the fixture downstream under the event id (test/support/fixture-tools.ts). */
const NOTIFY = FixtureTool.notify;
const notifyArgs = (key: string) => ({ idempotency_key: key, to: 'grace@example.com', text: 'Hi Grace.' });

describe('by hand: relay, sweep and consumer driven one step at a time', () => {
  let stack: FixtureStack;
  let client: Client;
  const time = manualClock();
  const now = () => time.advance(Math.max(0, Date.now() - time.clock())); // the workers' clock catches up with real time

  beforeAll(async () => {
    stack = await startFixtureStack({
      env: { DOWNSTREAM_TIMEOUT_MS: '2000' },
      workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false, clock: time.clock, consumer: { retryBaseMs: 0 } },
    });
    client = await connectClient(stack, TENANT);
  });
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  });

  const messageOf = async (eventId: string) => JSON.stringify((await stack.services.outbox.getEvent(eventId))!.message);

  it('a cancelled completion transaction leaves neither the record nor an event', async () => {
    const key = newKey();
    const eventId = `evt_collision-${newKey()}`;
    // Someone else's event already holds the id the tool will use: DynamoDB cancels the whole transaction.
    const foreign = { ...Keys.outboxEvent(eventId), owner: 'someone else' };
    await stack.services.doc.send(new PutCommand({ TableName: stack.config.tableName, Item: foreign }));
    const newEventId = stack.services.newEventId;
    stack.services.newEventId = () => eventId;
    try {
      const answer = await callWrite(client, NOTIFY, notifyArgs(key));
      expect(answer).toMatchObject({ outcome: 'failed', retryable: true });
    } finally {
      stack.services.newEventId = newEventId;
    }
    expect(await storedItem(stack.services.doc, stack.config.tableName, TENANT, NOTIFY, key)).toBeUndefined();
    const { Item } = await stack.services.doc.send(
      new GetCommand({ TableName: stack.config.tableName, Key: Keys.outboxEvent(eventId), ConsistentRead: true }),
    );
    expect(Item).toEqual(foreign);
    expect(await operationStatus(client, NOTIFY, key)).toMatchObject({ status: 'not_found' });
    // The key was released: the same call executes now, with a fresh event.
    const retry = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    expect(retry).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(retry.result!.event_id).not.toBe(eventId);
  });

  it('the same event delivered twice, in one batch or side by side, makes one email', async () => {
    const handler = createConsumerHandler(stack.workers, logger);

    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const body = await messageOf(result!.event_id);
    now();
    const batch = await handler(sqsEvent([body, body]));
    expect(batch.batchItemFailures).toEqual([]); // the copy is acknowledged as a duplicate
    expect(stack.downstream.bookings(result!.event_id)).toHaveLength(1);
    expect(await operationStatus(client, NOTIFY, key)).toMatchObject({ delivery: { status: 'delivered' } });

    // Side by side: the second arrives while the first is still sending (the downstream holds it). It must not send.
    const key2 = newKey();
    const second = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key2));
    const body2 = await messageOf(second.result!.event_id);
    const slow = stack.downstream.hold(second.result!.event_id);
    now();
    const first = handler(sqsEvent([body2]));
    await slow.entered; // the first delivery reached the downstream
    const duplicate = await handler(sqsEvent([body2]));
    slow.release();
    expect(duplicate.batchItemFailures).toHaveLength(1); // left on the queue for later: the claim is live
    expect((await first).batchItemFailures).toEqual([]);
    expect(stack.downstream.bookings(second.result!.event_id)).toHaveLength(1);
    // Later, the redelivered duplicate meets the settled claim.
    expect((await handler(sqsEvent([body2], 2))).batchItemFailures).toEqual([]);
    expect(stack.downstream.bookings(second.result!.event_id)).toHaveLength(1);
  });

  it('an event whose message was lost is sent again by the sweep, and delivered once', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;
    const sends = async () => (await operationStatus(client, NOTIFY, key)).delivery;
    now();
    await stack.workers.relay.sweep();
    expect(await sends()).toMatchObject({ status: 'pending', sends: 1 });
    // The message is lost (a purged queue, a region failover): the event is still pending in the table.
    await stack.workers.sqs.send(new PurgeQueueCommand({ QueueUrl: stack.queue.queueUrl }));

    // Not due yet: a sent event is left to the consumer for a while.
    await stack.workers.relay.sweep();
    expect(await sends()).toMatchObject({ sends: 1 });
    // Past its next look, plus the grace the reconciler leaves the stream relay: the reconciler's sweep re-sends it.
    time.advance(stack.workers.relay.nextLookAfter(1) + 30_000 + 1);
    const report = await stack.workers.reconciler.runOnce();
    expect(report.outbox?.resent).toBeGreaterThanOrEqual(1);
    expect(await sends()).toMatchObject({ status: 'pending', sends: 2 });

    const { Messages } = await stack.workers.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: stack.queue.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    const resent = (Messages ?? []).filter((m) => m.Body?.includes(eventId));
    expect(resent).toHaveLength(1);
    now();
    await createConsumerHandler(stack.workers, logger)(sqsEvent([resent[0]!.Body!]));
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
    expect(await sends()).toMatchObject({ status: 'delivered', sends: 2 });
  });

  it('an event the queue refuses stays pending; the sweep tries again with backoff, and sends it once the queue takes it', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;
    const stored = async () => (await stack.services.outbox.getEvent(eventId))!;
    now();
    const refusing = createWorkers(
      {
        ...stack.services,
        config: { ...stack.config, sideEffects: { ...stack.config.sideEffects, outboxQueueUrl: `${stack.queue.queueUrl}-missing` } },
      },
      { tools: [], clock: time.clock },
    );
    try {
      await refusing.relay.sweep();
      expect(await stored()).toMatchObject({
        status: 'PENDING',
        sendCount: 0,
        refusedCount: 1,
        attentionAt: time.clock() + refusing.relay.nextLookAfter(1),
      });
      // Not due yet: the next sweep leaves it alone instead of asking the queue again.
      await refusing.relay.sweep();
      expect((await stored()).refusedCount).toBe(1);
      time.advance(refusing.relay.nextLookAfter(1) + 1);
      await refusing.relay.sweep();
      expect(await stored()).toMatchObject({ refusedCount: 2, attentionAt: time.clock() + refusing.relay.nextLookAfter(2) });
    } finally {
      refusing.sqs.destroy();
    }
    time.advance(stack.workers.relay.nextLookAfter(2) + 1);
    await stack.workers.relay.sweep();
    expect(await stored()).toMatchObject({ status: 'PENDING', sendCount: 1, refusedCount: 2 });
    expect(await peekQueue(stack, stack.queue.queueUrl)).toContain(eventId);
  });

  it('a claim write that uses up the lease runs no effect; the next attempt asks the downstream first, then delivers once', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const message = (await stack.services.outbox.getEvent(result!.event_id))!.message;
    now();
    const effects: string[] = [];
    const handler = {
      deliver: async () => (effects.push('deliver'), { message_id: 'msg-1' }),
      verify: async () => (effects.push('verify'), { kind: 'absent' as const }),
    };
    const options = { handlers: { [message.type]: handler }, logger, clock: time.clock, downstreamTimeoutMs: 2000 };
    // The claim lands, but only after the whole lease (a throttled write retried by the SDK, say).
    const slowClaims: OutboxStore = Object.create(stack.services.outbox);
    slowClaims.claimDelivery = async (...args) => {
      const claim = await stack.services.outbox.claimDelivery(...args);
      time.advance(slow.leaseMs);
      return claim;
    };
    const slow = new OutboxConsumer({ ...options, outbox: slowClaims });
    expect(await slow.consume(message, 1)).toMatchObject({ kind: 'retry' });
    expect(effects).toEqual([]);

    time.advance(1);
    const next = new OutboxConsumer({ ...options, outbox: stack.services.outbox });
    expect(await next.consume(message, 2)).toEqual({ kind: 'delivered' });
    expect(effects).toEqual(['verify', 'deliver']);
  });

  it('a takeover whose lookup fails, throws, answers nonsense or answers too late delivers nothing: the event stays pending, the claim deferred', async () => {
    const lookups: Array<[string, (ctx: { signal: AbortSignal }) => Promise<ReconcileFinding>]> = [
      [
        'throws',
        async () => {
          throw new Error('connection reset');
        },
      ],
      ['cannot answer', async () => ({ kind: 'unreachable', reason: 'HTTP 503' })],
      ['answers nonsense', async () => ({ kind: 'maybe' }) as unknown as ReconcileFinding],
      // Ignores its signal and says "absent" after the consumer's budget ran out: it was not asked in time.
      [
        'answers after its time ran out',
        async ({ signal }) => {
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          return { kind: 'absent' };
        },
      ],
    ];
    for (const [what, verify] of lookups) {
      const key = newKey();
      const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
      const message = (await stack.services.outbox.getEvent(result!.event_id))!.message;
      now();
      // A consumer claimed the event and crashed (or could not tell whether the notification was booked): its lease passed.
      await stack.services.outbox.claimDelivery(message.event_id, 'crashed consumer', time.clock() + 1000, time.clock());
      time.advance(3600_000);
      const delivered: string[] = [];
      const consumer = new OutboxConsumer({
        outbox: stack.services.outbox,
        handlers: {
          [message.type]: { deliver: async () => (delivered.push(what), { message_id: 'msg-guess' }), verify: (_m, ctx) => verify(ctx) },
        },
        logger,
        clock: time.clock,
        downstreamTimeoutMs: 50,
      });
      expect(await consumer.consume(message, 2), what).toMatchObject({ kind: 'retry' });
      expect(delivered, what).toEqual([]);
      expect(await stack.services.outbox.getEvent(message.event_id), what).toMatchObject({ status: 'PENDING' });
      expect(await stack.services.outbox.getMarker(message.event_id), what).toMatchObject({ state: 'CLAIMED', attempts: 2 });
      expect((await operationStatus(client, NOTIFY, key)).delivery, what).toMatchObject({ status: 'pending' });
    }
  });

  it("a takeover whose lookup answers 'absent' while the earlier request's in-flight window lasts defers; after the window it delivers once", async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const message = (await stack.services.outbox.getEvent(result!.event_id))!.message;
    now();
    const effects: string[] = [];
    const handler = {
      deliver: async () => (effects.push('deliver'), { message_id: 'msg-1' }),
      verify: async () => (effects.push('verify'), { kind: 'absent' as const }),
    };
    const consumer = new OutboxConsumer({
      outbox: stack.services.outbox,
      handlers: { [message.type]: handler },
      logger,
      clock: time.clock,
      downstreamTimeoutMs: 2000,
    });
    const windowMs = consumer.inFlightWindowOf(handler);
    // A consumer claimed the event, sent the notification and crashed: its request may land until its lease's end plus the window.
    const leaseEnd = time.clock() + consumer.leaseMs;
    await stack.services.outbox.claimDelivery(message.event_id, 'crashed consumer', leaseEnd, time.clock());
    time.advance(consumer.leaseMs);

    const early = await consumer.consume(message, 2);
    expect(early).toMatchObject({ kind: 'retry' });
    expect(effects).toEqual(['verify']);
    // Deferred to the window's end, and the message comes back no earlier.
    expect(await stack.services.outbox.getMarker(message.event_id)).toMatchObject({
      state: 'CLAIMED',
      leaseUntil: leaseEnd + windowMs,
      lastSendBy: leaseEnd,
    });
    expect(early.kind === 'retry' && early.delayMs).toBe(windowMs);
    expect(await stack.services.outbox.getEvent(message.event_id)).toMatchObject({ status: 'PENDING' });

    // One moment before the window's end the claim still holds; at its end "absent" is conclusive.
    time.advance(windowMs - 1);
    expect(await consumer.consume(message, 3)).toMatchObject({ kind: 'retry', reason: 'claimed by another delivery' });
    time.advance(1);
    expect(await consumer.consume(message, 4)).toEqual({ kind: 'delivered' });
    expect(effects).toEqual(['verify', 'verify', 'deliver']);
  });

  it('a delivery request of a crashed consumer that lands inside its window is found, never sent again: one email', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const message = (await stack.services.outbox.getEvent(result!.event_id))!.message;
    now();
    // The mailbox: what the crashed consumer sent lands once `landsAt` has come; a lookup before that finds nothing.
    const mailbox: string[] = [];
    let landsAt = Number.POSITIVE_INFINITY;
    const land = () => {
      if (time.clock() >= landsAt && !mailbox.includes('first')) mailbox.push('first');
    };
    const handler = {
      deliver: async () => (land(), mailbox.push('again'), { message_id: 'msg-again' }),
      verify: async () => (
        land(), mailbox.includes('first') ? { kind: 'found' as const, result: { message_id: 'msg-first' } } : { kind: 'absent' as const }
      ),
    };
    const consumer = new OutboxConsumer({
      outbox: stack.services.outbox,
      handlers: { [message.type]: handler },
      logger,
      clock: time.clock,
      downstreamTimeoutMs: 2000,
    });
    const windowMs = consumer.inFlightWindowOf(handler);
    const leaseEnd = time.clock() + consumer.leaseMs;
    await stack.services.outbox.claimDelivery(message.event_id, 'crashed consumer', leaseEnd, time.clock());
    // Its request was sent before its lease's end and lands just before the window's end.
    landsAt = leaseEnd + windowMs - 1;
    time.advance(consumer.leaseMs);

    expect(await consumer.consume(message, 2)).toMatchObject({ kind: 'retry' });
    time.advance(windowMs);
    expect(await consumer.consume(message, 3)).toEqual({ kind: 'delivered' });
    expect(mailbox).toEqual(['first']);
    expect(await stack.services.outbox.getMarker(message.event_id)).toMatchObject({ state: 'DELIVERED' });
  });

  it('an inFlightWindowMs that is not a whole number of milliseconds is refused when the consumer is built', () => {
    const deliver = async () => ({});
    for (const window of [-1, 1.5, Number.NaN, '100' as unknown as number]) {
      expect(
        () =>
          new OutboxConsumer({
            outbox: stack.services.outbox,
            handlers: { [FIXTURE_NOTIFY_EVENT]: { deliver, inFlightWindowMs: window } },
            logger,
            downstreamTimeoutMs: 2000,
          }),
      ).toThrow(/the delivery handler of 'fixture.notify': inFlightWindowMs must be a whole number of milliseconds/);
    }
  });

  it('an event never delivered is given up after a bounded number of sends: FAILED, not lost silently', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const delivery = async () => (await operationStatus(client, NOTIFY, key)).delivery;
    now();
    const { relay } = stack.workers;
    for (let send = 1; send <= 8; send++) {
      await relay.sweep();
      expect(await delivery(), `send ${send}`).toMatchObject({ status: 'pending', sends: send });
      await stack.workers.sqs.send(new PurgeQueueCommand({ QueueUrl: stack.queue.queueUrl }));
      time.advance(relay.nextLookAfter(send) + 1);
    }
    expect((await relay.sweep()).abandoned).toBeGreaterThanOrEqual(1);
    expect(await delivery()).toMatchObject({
      event_id: result!.event_id,
      status: 'failed',
      sends: 8,
      error: { code: 'OUTBOX_UNDELIVERED' },
    });
  });

  it('a delivery whose outcome is unknown when its budget is spent stays pending: the sweep sends it again and the next consumer finds the effect', async () => {
    // A consumer whose delivery budget (one second) is spent by the time it tries.
    const shortBudget = createWorkers(
      { ...stack.services, config: { ...stack.config, sideEffects: { ...stack.config.sideEffects, outboxDeliveryBudgetMs: 1000 } } },
      { tools: [], clock: time.clock, deliveries: stack.deliveries },
    );
    const handler = createConsumerHandler(shortBudget, logger);
    await stack.workers.sqs.send(new PurgeQueueCommand({ QueueUrl: stack.queue.queueUrl }));
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;
    const bookings = () => stack.downstream.bookings(eventId);
    now();
    time.advance(1000);
    // The last try: the notification is booked, but the answer never arrives.
    stack.downstream.arm({ mode: 'commit-then-timeout' });
    expect((await handler(sqsEvent([await messageOf(eventId)], 2))).batchItemFailures).toEqual([]);
    shortBudget.sqs.destroy();
    expect(bookings()).toHaveLength(1);
    // Not FAILED: the booking exists, and a caller told "failed" might send it again under a new key.
    expect((await operationStatus(client, NOTIFY, key)).delivery).toMatchObject({ status: 'pending' });
    expect(await peekQueue(stack, stack.queue.deadLetterQueueUrl)).toContain(eventId);

    // The message went to the dead-letter queue; the sweep sends the event again, and its consumer verifies first.
    time.advance(OutboxDefaults.redeliverAfterMs + 30_000 + 1);
    expect((await stack.workers.relay.sweep()).sent).toBeGreaterThanOrEqual(1);
    const resent =
      (
        await stack.workers.sqs.send(
          new ReceiveMessageCommand({ QueueUrl: stack.queue.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
        )
      ).Messages?.filter((m) => m.Body?.includes(eventId)) ?? [];
    expect(resent).toHaveLength(1);
    expect((await handler(sqsEvent([resent[0]!.Body!]))).batchItemFailures).toEqual([]);
    expect(bookings()).toHaveLength(1);
    expect((await operationStatus(client, NOTIFY, key)).delivery).toMatchObject({
      status: 'delivered',
      result: { booking_id: bookings()[0]!.booking_id },
    });
  });

  it('retries a refused delivery with backoff doubling up to 12 h, at least its Retry-After, until the budget is spent; then FAILED and dead-lettered', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const message = (await stack.services.outbox.getEvent(result!.event_id))!.message;
    const clock = manualClock(message.created_at);
    let tries = 0;
    const refusing = {
      deliver: async () => {
        tries++;
        throw new TransientToolError('DOWNSTREAM_UNAVAILABLE', 'the downstream is unavailable (HTTP 503)', tries === 3 ? 90_000 : 1000);
      },
    };
    const budgetMs = 3 * 24 * 3600_000;
    const consumer = new OutboxConsumer({
      outbox: stack.services.outbox,
      handlers: { [message.type]: refusing },
      logger,
      clock: clock.clock,
      downstreamTimeoutMs: 2000,
      deliveryBudgetMs: budgetMs,
    });
    const delays: number[] = [];
    for (let receive = 1; receive <= 100; receive++) {
      const outcome = await consumer.consume(message, receive);
      if (outcome.kind !== 'retry') {
        expect(outcome).toEqual({ kind: 'dead-letter', reason: 'DOWNSTREAM_UNAVAILABLE' });
        break;
      }
      delays.push(outcome.delayMs);
      // The sweep leaves the event to this retry (a grace after it is due), and re-sends it only if it is lost.
      expect((await stack.services.outbox.getEvent(message.event_id))!.attentionAt).toBe(
        clock.clock() + outcome.delayMs + OutboxDefaults.redeliverAfterMs,
      );
      expect((await stack.services.outbox.getEvent(message.event_id))!.status).toBe('PENDING');
      clock.advance(outcome.delayMs);
    }
    // Doubling from 1 s, the third try's Retry-After (90 s) as a floor, never more than SQS's 12 h per extension.
    expect(delays.slice(0, 5)).toEqual([1000, 2000, 90_000, 8000, 16_000]);
    expect(Math.max(...delays)).toBe(12 * 3600_000);
    // The last wait ends exactly at the budget, and the receives stay within what the redrive count allows.
    expect(delays.reduce((sum, delay) => sum + delay, 0)).toBe(budgetMs);
    expect(tries).toBe(delays.length + 1);
    expect(tries).toBeLessThanOrEqual(receivesWithinBudget(budgetMs));
    const failed = await stack.services.outbox.getEvent(message.event_id);
    expect(failed).toMatchObject({ status: 'FAILED', error: { code: 'DOWNSTREAM_UNAVAILABLE' } });
    expect(failed!.error!.message).toMatch(/gave up: delivery budget of 4320 min spent.*dead-letter queue/);
  });

  it('a message lost while its retry waits (the local queue is in memory) is sent again by the sweep from the table', async () => {
    await stack.workers.sqs.send(new PurgeQueueCommand({ QueueUrl: stack.queue.queueUrl }));
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;
    now();
    await stack.workers.relay.sweep();
    const handler = createConsumerHandler(stack.workers, logger);
    stack.downstream.arm({ mode: 'unavailable', times: 1 });
    expect((await handler(sqsEvent([await messageOf(eventId)]))).batchItemFailures).toHaveLength(1);
    // A restart of `npm start` loses every message of the in-memory queue, those waiting for their retry too.
    await stack.workers.sqs.send(new PurgeQueueCommand({ QueueUrl: stack.queue.queueUrl }));

    expect((await stack.workers.relay.sweep()).sent).toBe(0); // its retry is not due: no duplicate meanwhile
    time.advance(1000 + OutboxDefaults.redeliverAfterMs + 1);
    expect((await stack.workers.relay.sweep()).resent).toBe(1);
    const { Messages } = await stack.workers.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: stack.queue.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    const resent = (Messages ?? []).filter((m) => m.Body?.includes(eventId));
    expect(resent).toHaveLength(1);
    expect((await handler(sqsEvent([resent[0]!.Body!], 1))).batchItemFailures).toEqual([]);
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
    expect((await operationStatus(client, NOTIFY, key)).delivery).toMatchObject({ status: 'delivered' });
  });

  it('the DynamoDB Streams relay sends outbox INSERTs only, and reports what the queue refused', async () => {
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const { Item } = await stack.services.doc.send(
      new GetCommand({ TableName: stack.config.tableName, Key: Keys.outboxEvent(result!.event_id), ConsistentRead: true }),
    );
    const image = marshall(Item!, { removeUndefinedValues: true }) as never;
    const record = (eventName: 'INSERT' | 'MODIFY', sequence: string, newImage = image) => ({
      eventName,
      dynamodb: { NewImage: newImage, SequenceNumber: sequence },
    });
    const orderImage = marshall({ ...orderKey(TENANT, 'ord_x'), order_id: 'ord_x' }) as never;
    const stream = { Records: [record('MODIFY', '1'), record('INSERT', '2', orderImage), record('INSERT', '3')] } as never;

    await stack.workers.sqs.send(new PurgeQueueCommand({ QueueUrl: stack.queue.queueUrl }));
    now();
    expect(await createRelayHandler(stack.workers)(stream)).toEqual({ batchItemFailures: [] });
    expect(await peekQueue(stack, stack.queue.queueUrl)).toEqual([result!.event_id]);

    // A queue that refuses: the record is reported, so the stream retries from it.
    const broken = createWorkers(
      {
        ...stack.services,
        config: { ...stack.config, sideEffects: { ...stack.config.sideEffects, outboxQueueUrl: `${stack.queue.queueUrl}-missing` } },
      },
      { tools: [] },
    );
    expect(await createRelayHandler(broken)(stream)).toEqual({ batchItemFailures: [{ itemIdentifier: '3' }] });
    broken.sqs.destroy();
  });
});

describe('running workers: a downstream down for a while, and one down for longer than the budget', () => {
  let stack: FixtureStack;
  let client: Client;

  beforeAll(async () => {
    stack = await startFixtureStack({
      env: { DOWNSTREAM_TIMEOUT_MS: '2000' },
      workers: { reconcilerTimer: false, consumer: { retryBaseMs: 0 } },
    });
    client = await connectClient(stack, TENANT);
  });
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  });

  it('a mailbox unavailable for 20 attempts (503, Retry-After) still ends with exactly one email', async () => {
    // Retry-After: 0, so the 20 attempts follow one another: the subject is how many, not how long (the dead-letter
    // test below waits out Retry-After: 1 through the queue's visibility).
    stack.downstream.arm({ mode: 'unavailable', times: 20, retryAfterSeconds: 0 });
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;

    expect(await settledDelivery(client, NOTIFY, key, 90_000)).toMatchObject({ status: 'delivered' });
    expect(stack.downstream.armed()).toEqual([]);
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
    expect(await peekQueue(stack, stack.queue.deadLetterQueueUrl)).not.toContain(eventId);
  }, 120_000);
});

describe('running workers: a mailbox that sends an email after the consumer gave up on the request', () => {
  let stack: FixtureStack;
  let client: Client;

  beforeAll(async () => {
    // Lease 2 x 500 + 1000 ms; the downstream client gives up after 500 ms. The late request's in-flight window (the
    // lease plus the timeout) is waited out in real time before the consumer may trust an "absent": short settings.
    stack = await startFixtureStack({
      env: { DOWNSTREAM_TIMEOUT_MS: '500' },
      workers: { reconcilerTimer: false, consumer: { retryBaseMs: 0 } },
    });
    client = await connectClient(stack, TENANT);
  });
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  });

  it('a late-landing mailbox (late-commit longer than the downstream timeout) ends with exactly one email', async () => {
    // The downstream keeps the request and books the notification 1.75 s after it arrived, long after the consumer hung
    // up (and without deduplicating: a second request would book a second one).
    const lateMs = 1750;
    stack.downstream.arm({ mode: 'late-commit', delayMs: lateMs });
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;

    const delivery = await settledDelivery(client, NOTIFY, key, 60_000);
    expect(delivery).toMatchObject({ status: 'delivered' });
    // Once the late request landed, however the delivery went: count what the downstream booked.
    expect(stack.downstream.calls(eventId)).toBeGreaterThanOrEqual(1);
    await stack.downstream.landed();
    const booked = stack.downstream.bookings(eventId);
    expect(booked).toHaveLength(1);
    expect(delivery.result).toMatchObject({ booking_id: booked[0]!.booking_id });
  }, 90_000);
});

describe('running workers: the dead-letter queue once the delivery budget is spent', () => {
  let stack: FixtureStack;
  let client: Client;

  beforeAll(async () => {
    stack = await startFixtureStack({
      env: { DOWNSTREAM_TIMEOUT_MS: '2000', OUTBOX_DELIVERY_BUDGET_SECONDS: '3' },
      workers: { reconcilerTimer: false, consumer: { retryBaseMs: 0 } },
    });
    client = await connectClient(stack, TENANT);
  });
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  });

  it('a delivery failing for its whole budget ends in the DLQ with the event FAILED; a redrive delivers it once', async () => {
    stack.downstream.arm({ mode: 'unavailable', times: 50 });
    const key = newKey();
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(key));
    const eventId = result!.event_id;

    const delivery = await settledDelivery(client, NOTIFY, key, 30_000);
    expect(delivery).toMatchObject({ status: 'failed', error: { code: ErrorCode.TRANSIENT_FAILURE } });
    expect(delivery.error!.message).toMatch(/gave up: delivery budget of .* spent .*; the message is in the dead-letter queue/);
    const inDlq = await eventually(async () => {
      const { Messages } = await stack.workers.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: stack.queue.deadLetterQueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      return Messages?.find((m) => m.Body?.includes(eventId));
    }, 'the message in the dead-letter queue');
    // Several attempts reached the downstream (each one a 503), none of them booked anything.
    expect(stack.downstream.armed()[0]?.remaining).toBeLessThan(49);
    expect(stack.downstream.bookings(eventId)).toHaveLength(0);

    // An operator fixes the downstream and redrives the message: delivered, exactly once.
    stack.downstream.clear();
    await stack.workers.sqs.send(new SendMessageCommand({ QueueUrl: stack.queue.queueUrl, MessageBody: inDlq.Body! }));
    await eventually(
      async () => ((await operationStatus(client, NOTIFY, key)).delivery?.status === 'delivered' ? true : undefined),
      'the redriven delivery',
    );
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
  });
});

describe('a consumer killed with SIGKILL mid-effect', () => {
  let stack: FixtureStack;
  let client: Client;
  const children = new Set<ChildProcess>();
  let workerBundle: string;

  beforeAll(async () => {
    // The consumer processes run one bundle of consumer-worker.ts, as a Lambda runs its bundle.
    workerBundle = (await childBundle('consumer-worker', { 'consumer-worker': 'test/support/consumer-worker.ts' }))['consumer-worker'];
    // The consumer runs only in child processes. Lease = 2 x 1000 + 1000 ms; the queue hides a received message 4 s.
    stack = await startFixtureStack({
      env: { DOWNSTREAM_TIMEOUT_MS: '1000' },
      workers: { consumerPoller: false, reconcilerTimer: false },
      queueVisibilityTimeoutSeconds: 4,
    });
    client = await connectClient(stack, TENANT);
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await client?.close();
    await stack?.stop();
  });

  /**
   * A consumer process that loads its modules now and consumes nothing until `start()`: the test loads its three
   * consumers at once (a process start is seconds of CPU, more on a busy machine) and starts each when it needs it.
   */
  function spawnConsumer(): { start(): Promise<ChildProcess> } {
    const child = spawn(process.execPath, [workerBundle, stack.downstream.url, '--standby'], {
      env: { ...stack.env, POWERTOOLS_LOG_LEVEL: 'SILENT', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.add(child);
    child.once('exit', () => children.delete(child));
    let output = '';
    const said = (word: string) =>
      new Promise<void>((resolve, reject) => {
        const check = () => output.includes(word) && resolve();
        child.stdout!.on('data', (chunk: Buffer) => ((output += chunk.toString()), check()));
        child.once('exit', (code) => reject(new Error(`consumer exited early (${code})`)));
        check();
      });
    const loaded = said('loaded');
    loaded.catch(() => {}); // an early exit is reported by start()
    return {
      async start() {
        await loaded;
        child.stdin!.write('start\n');
        await said('ready');
        return child;
      },
    };
  }

  async function kill(child: ChildProcess) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  it('after the effect committed, or before it did, a restarted consumer ends with exactly one effect', async () => {
    const [first, second, third] = [spawnConsumer(), spawnConsumer(), spawnConsumer()];
    let consumer = await first.start();

    // 1. Killed while waiting for the downstream's answer, after the notification was booked.
    stack.downstream.arm({ mode: 'commit-then-timeout', delayMs: 60_000 });
    const emailKey = newKey();
    const email = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(emailKey));
    await eventually(
      async () => (stack.downstream.bookings(email.result!.event_id).length === 1 ? true : undefined),
      'the notification to be booked',
    );
    await kill(consumer);
    // Died holding its claim: the effect exists, nothing recorded it.
    expect(await stack.services.outbox.getMarker(email.result!.event_id)).toMatchObject({ state: 'CLAIMED' });
    expect(await operationStatus(client, NOTIFY, emailKey)).toMatchObject({ delivery: { status: 'pending' } });

    // 2. A new consumer takes the message over after the lease, asks the downstream, finds the booking: no second one.
    consumer = await second.start();
    expect(await settledDelivery(client, NOTIFY, emailKey)).toMatchObject({ status: 'delivered' });
    expect(stack.downstream.bookings(email.result!.event_id)).toHaveLength(1);

    // 3. Killed while the downstream is still working on the request, before it committed anything.
    const ticketKey = newKey();
    const eventId = stack.services.newEventId();
    const newEventId = stack.services.newEventId;
    stack.services.newEventId = () => eventId;
    const working = stack.downstream.hold(eventId); // never released: the request never commits
    const ticket = await callWrite<{ event_id: string }>(client, NOTIFY, notifyArgs(ticketKey)).finally(
      () => (stack.services.newEventId = newEventId),
    );
    await working.entered; // the request reached the downstream
    await kill(consumer);
    expect(await stack.services.outbox.getMarker(ticket.result!.event_id)).toMatchObject({ state: 'CLAIMED' });

    // 4. The next consumer finds no booking for the event and books it: exactly one.
    consumer = await third.start();
    expect(await settledDelivery(client, NOTIFY, ticketKey)).toMatchObject({ status: 'delivered' });
    expect(stack.downstream.bookings(ticket.result!.event_id)).toHaveLength(1);
    await stopChild(consumer);
  }, 60_000);
});
