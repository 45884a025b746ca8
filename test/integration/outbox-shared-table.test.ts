import { randomUUID } from 'node:crypto';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logger } from '../../lambdas/observability/logger';
import type { EventPublisher } from '../../lambdas/outbox/publisher';
import { createConsumerHandler, createRelayHandler } from '../../lambdas/runtime/worker-events';
import { createRelay } from '../../lambdas/runtime/workers';
import { deliveryKeyOf, outboxEventKeyOf } from '../../lambdas/store/record-item';
import { newKey } from '../support/engine';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient } from '../support/mcp';
import { eventually, peekQueue, sqsEvent } from '../support/side-effects';

/**
 * Two endpoints with deliveries on one table, each with its own queue and consumer (as two IdempotentMcpEndpoints on
 * one `existingTable`): one with TABLE_KEY_PREFIX `ep-a:`, one unprefixed (the table's first owner). Same tenant,
 * same tool, same event type, same idempotency keys on both. Each endpoint's relay sends, and its deliveries handler
 * (booking at its own downstream) performs, only its own events, once each; the other's are never sent, claimed or
 * marked by it.
 */
const TENANT = 'tenant-shared';
const notifyArgs = (key: string) => ({ idempotency_key: key, to: 'grace@example.com', text: 'Hi Grace.' });

describe('two endpoints with deliveries on one table', () => {
  const tableName = `shared-outbox-${randomUUID()}`;
  let a: FixtureStack;
  let b: FixtureStack;
  let clientA: Client;
  let clientB: Client;

  beforeAll(async () => {
    const workers = { reconcilerTimer: false, relayPollMs: 100, consumer: { retryBaseMs: 0 } };
    a = await startFixtureStack({ tableName, env: { TABLE_KEY_PREFIX: 'ep-a:' }, workers });
    b = await startFixtureStack({ tableName, env: { TABLE_KEY_PREFIX: '' }, workers });
    [clientA, clientB] = await Promise.all([connectClient(a, TENANT), connectClient(b, TENANT)]);
  });
  afterAll(async () => {
    await clientA?.close();
    await clientB?.close();
    await a?.stop();
    await b?.stop();
  });

  const eventIds = { a: [] as string[], b: [] as string[] };

  it("each endpoint's deliveries handler gets only its own events, exactly once each", async () => {
    for (const key of [newKey(), newKey(), newKey()]) {
      // The same call on both endpoints: two records, two events, one per owner.
      const [onA, onB] = await Promise.all([
        callWrite<{ event_id: string }>(clientA, FixtureTool.notify, notifyArgs(key)),
        callWrite<{ event_id: string }>(clientB, FixtureTool.notify, notifyArgs(key)),
      ]);
      expect([onA.outcome, onB.outcome]).toEqual(['succeeded', 'succeeded']);
      eventIds.a.push(onA.result!.event_id);
      eventIds.b.push(onB.result!.event_id);
    }
    for (const [stack, ids] of [
      [a, eventIds.a],
      [b, eventIds.b],
    ] as const) {
      for (const id of ids)
        await eventually(
          async () => ((await stack.services.outbox.getEvent(id))?.status === 'DELIVERED' ? true : undefined),
          `${id} delivered`,
        );
    }
    // Each endpoint's downstream booked its own events once each, and none of the other's.
    expect(
      a.downstream
        .bookings()
        .map((booking) => booking.key)
        .sort(),
    ).toEqual([...eventIds.a].sort());
    expect(
      b.downstream
        .bookings()
        .map((booking) => booking.key)
        .sort(),
    ).toEqual([...eventIds.b].sort());
    // No relay put the other's event on its queue: nothing was misrouted, so nothing went to a dead-letter queue.
    for (const stack of [a, b]) expect(await peekQueue(stack, stack.queue.deadLetterQueueUrl)).toEqual([]);
    // Each store sees its own events only.
    expect(await a.services.outbox.getEvent(eventIds.b[0]!)).toBeUndefined();
    expect(await b.services.outbox.getEvent(eventIds.a[0]!)).toBeUndefined();
  });

  it("a stream relay passes over the other endpoint's INSERT, and a consumer handed the other's message runs and marks nothing", async () => {
    const [onA, onB] = await Promise.all([
      callWrite<{ event_id: string }>(clientA, FixtureTool.notify, notifyArgs(newKey())),
      callWrite<{ event_id: string }>(clientB, FixtureTool.notify, notifyArgs(newKey())),
    ]);
    const idA = onA.result!.event_id;
    const idB = onB.result!.event_id;
    const eventA = await eventually(
      async () => a.services.outbox.getEvent(idA).then((e) => (e?.status === 'DELIVERED' ? e : undefined)),
      'A delivered',
    );
    const eventB = await eventually(
      async () => b.services.outbox.getEvent(idB).then((e) => (e?.status === 'DELIVERED' ? e : undefined)),
      'B delivered',
    );
    const itemOf = async (key: { pk: string; sk: string }) =>
      (await a.services.doc.send(new GetCommand({ TableName: tableName, Key: key, ConsistentRead: true }))).Item;
    const itemB = (await itemOf(outboxEventKeyOf(idB)))!;
    const markerB = await itemOf(deliveryKeyOf(idB));

    // The stream relay of each (deployed: its event source's filter drops the other's INSERTs first) sends only its own.
    const streamEvent = (item: Record<string, unknown>) =>
      ({
        Records: [
          {
            eventName: 'INSERT',
            dynamodb: { SequenceNumber: '1', NewImage: marshall({ ...item, status: 'PENDING' }, { removeUndefinedValues: true }) },
          },
        ],
      }) as never;
    const streamRelayOf = (stack: FixtureStack, sent: string[]) => {
      const recorder: EventPublisher = { publish: async (messages) => (sent.push(...messages.map((m) => m.event_id)), { failed: [] }) };
      return createRelayHandler(
        createRelay({ config: stack.config, outbox: stack.services.outbox, logger, clock: Date.now }, { wrapPublisher: () => recorder }),
      );
    };
    const sentByA: string[] = [];
    const sentByB: string[] = [];
    expect(await streamRelayOf(a, sentByA)(streamEvent(itemB))).toEqual({ batchItemFailures: [] });
    expect(await streamRelayOf(b, sentByB)(streamEvent(itemB))).toEqual({ batchItemFailures: [] });
    expect({ sentByA, sentByB }).toEqual({ sentByA: [], sentByB: [idB] });
    const bookingsBefore = a.downstream.bookings().length;

    // A's consumer, handed B's message: it delivers nothing, claims nothing, and leaves B's event as B settled it.
    const bodyB = JSON.stringify(eventB.message);
    expect(eventB.message.key_prefix).toBeUndefined();
    expect(eventA.message.key_prefix).toBe('ep-a:');
    expect((await createConsumerHandler(a.workers, logger)(sqsEvent([bodyB]))).batchItemFailures).toEqual([]);
    expect(a.downstream.bookings(idB)).toEqual([]);
    expect(a.downstream.bookings()).toHaveLength(bookingsBefore);
    expect(await itemOf(deliveryKeyOf(idB, 'ep-a:'))).toBeUndefined();
    expect(await itemOf(outboxEventKeyOf(idB))).toEqual(itemB);
    expect(await itemOf(deliveryKeyOf(idB))).toEqual(markerB);
    // The misrouted copy went where a person sees it (B's own event stays delivered, by B).
    expect(await peekQueue(a, a.queue.deadLetterQueueUrl)).toEqual([idB]);
  });
});
