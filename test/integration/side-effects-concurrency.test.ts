import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../support/local-stack';
import { newKey } from '../support/engine';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient, startTestStack } from '../support/mcp';
import { issueOperationId, sandboxLedger, settledDelivery } from '../support/side-effects';

/**
 * Dozens of identical calls at once, per tool, through the real endpoint: one effect each. On the reference
 * endpoint's tools (their providers' ledgers), and on fixture tools, whose downstream also counts the requests that
 * reached it: the payments provider deduplicates on our key, so its ledger alone would not show a second execution.
 */
let stack: LocalStack;
let client: Client;
const TENANT = 'tenant-concurrency';
const CALLS = 24;

beforeAll(async () => {
  stack = await startTestStack({ env: { DOWNSTREAM_TIMEOUT_MS: '3000' }, workers: { reconcilerTimer: false } });
  client = await connectClient(stack, TENANT);
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

async function callAtOnce<R>(tool: string, args: Record<string, unknown>, on: Client = client) {
  const answers = await Promise.all(Array.from({ length: CALLS }, () => callWrite<R>(on, tool, args)));
  // Every answer is the one result, or "still running, ask again": never a second execution, never an error.
  for (const answer of answers) expect(['succeeded', 'in_progress']).toContain(answer.outcome);
  const succeeded = answers.filter((a) => a.outcome === 'succeeded');
  expect(succeeded.length).toBeGreaterThanOrEqual(1);
  expect(succeeded.filter((a) => !a.replayed)).toHaveLength(1);
  return succeeded.map((a) => a.result!);
}

describe(`${CALLS} identical concurrent calls`, () => {
  it('request_payment: one payment, every success carries its payment_id', async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    const results = await callAtOnce<{ payment_id: string }>('request_payment', {
      operation_id: operationId,
      amount_minor: 100,
      currency: 'EUR',
      payee_id: 'payee-1',
    });
    const payments = (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === operationId);
    expect(payments).toHaveLength(1);
    expect(new Set(results.map((r) => r.payment_id))).toEqual(new Set([payments[0]!.payment_id]));
  });

  it.each([
    { tool: 'send_email', args: { to: 'lin@example.com', subject: 'Same', body: 'Once.' }, section: 'emails' as const },
    { tool: 'create_ticket', args: { title: 'Same', description: 'Once.', priority: 'low' }, section: 'tickets' as const },
  ])('$tool: one event, one effect', async ({ tool, args, section }) => {
    const key = newKey();
    const results = await callAtOnce<{ event_id: string }>(tool, { idempotency_key: key, ...args });
    const eventIds = new Set(results.map((r) => r.event_id));
    expect(eventIds.size).toBe(1);
    const [eventId] = [...eventIds];
    expect(await settledDelivery(client, tool, key)).toMatchObject({ event_id: eventId, status: 'delivered' });
    const effects = (await sandboxLedger(stack))[section].filter((e) => e.event_id === eventId);
    expect(effects).toHaveLength(1);
  });
});

describe(`${CALLS} identical concurrent calls on fixture tools, whose downstream counts every request`, () => {
  let fixture: FixtureStack;
  let fixtureClient: Client;
  beforeAll(async () => {
    // Nothing here queues an event or goes UNKNOWN: no workers.
    fixture = await startFixtureStack({ workers: { reconcilerTimer: false, relayPoller: false, consumerPoller: false } });
    fixtureClient = await connectClient(fixture, TENANT);
  });
  afterAll(async () => {
    await fixtureClient?.close();
    await fixture?.stop();
  });

  it('fixture_write: one request reaches the downstream, one booking, every success carries it', async () => {
    const key = newKey();
    const results = await callAtOnce<{ booking_id: string }>(FixtureTool.write, { idempotency_key: key, note: 'once' }, fixtureClient);
    expect(fixture.downstream.calls(key)).toBe(1);
    const bookings = fixture.downstream.bookings(key);
    expect(bookings).toHaveLength(1);
    expect(new Set(results.map((r) => r.booking_id))).toEqual(new Set([bookings[0]!.booking_id]));
  });
});
