import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../support/local-stack';
import { newKey } from '../support/engine';
import { callWrite, connectClient, startTestStack } from '../support/mcp';
import {
  armedFaults,
  armFault,
  eventually,
  issueOperationId,
  operationStatus,
  sandboxLedger,
  settledDelivery,
} from '../support/side-effects';

/**
 * Every fault the sandbox can inject, on every tool of the reference endpoint with a side effect, through the real
 * endpoint, queue and workers: each ends with exactly one effect in the sandbox's ledger and a settled record. The
 * subject is the reference endpoint's own tools (their clients' reading of each provider fault, their lookups by
 * key) against the sandbox's faults; the toolkit's handling of the same faults is tested on fixture tools
 * (test/integration/reconciler.test.ts, outbox.test.ts).
 */
let stack: LocalStack;
let client: Client;
const TENANT = 'tenant-faults';
/**
 * Short, so the in-flight windows waited out below are short: a tool's is its execution timeout (request_payment
 * keeps the engine's default, 10 s) plus this; the consumer's is its lease (twice this plus 1 s) plus this, 4 s.
 */
const DOWNSTREAM_TIMEOUT_MS = 1000;

beforeAll(async () => {
  stack = await startTestStack({
    // The reconciler's period is only the `unknown` answers' retry hint here (its timer is off): one short period.
    env: { DOWNSTREAM_TIMEOUT_MS: String(DOWNSTREAM_TIMEOUT_MS), RECONCILE_INTERVAL_MS: '200' },
    // The reconciler is driven by hand here (runOnce), so each step is visible; transient retries are immediate.
    workers: { reconcilerTimer: false, consumer: { retryBaseMs: 0 } },
  });
  client = await connectClient(stack, TENANT);
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

type Payment = { payment_id: string; status: string; amount_minor: number; currency: string };
const paymentArgs = (operationId: string) => ({
  operation_id: operationId,
  amount_minor: 1999,
  currency: 'EUR',
  payee_id: 'payee-42',
  memo: 'invoice 7',
});

/** Calls again with the same id, as an agent following the contract does, until the payment is settled. */
async function payUntilSettled(operationId: string) {
  const outcomes: string[] = [];
  for (let attempt = 0; attempt < 6; attempt++) {
    const answer = await callWrite<Payment>(client, 'request_payment', paymentArgs(operationId));
    outcomes.push(answer.replayed ? `${answer.outcome}(replayed)` : answer.outcome);
    if (answer.outcome === 'succeeded') return { answer, outcomes };
    expect(answer.retryable).toBe(true);
    // A reconciler run at once (a payment the provider has is found at once); after that, the agent waits as told:
    // an absence is only believed once the request's in-flight window has passed.
    if (answer.outcome === 'unknown' && attempt > 0) await new Promise((r) => setTimeout(r, Math.min(answer.retry_after_ms ?? 0, 20_000)));
    if (answer.outcome === 'unknown') await stack.workers.reconciler.runOnce();
    else await new Promise((r) => setTimeout(r, Math.min(answer.retry_after_ms ?? 0, 1000)));
  }
  throw new Error(`payment did not settle: ${outcomes.join(' -> ')}`);
}

async function paymentsWithKey(key: string) {
  return (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === key);
}

// The two describes run side by side (their faults are on separate targets, and request_payment queues no event):
// the payments' waits for their in-flight windows overlap the deliveries'. Each one's own tests keep their order.
describe.concurrent('request_payment (the provider deduplicates on our key)', () => {
  it.sequential('commit-then-timeout: unknown, the reconciler settles it to the provider payment, a retry replays it', async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    await armFault(stack, { target: 'payments', mode: 'commit-then-timeout' });

    const first = await callWrite(client, 'request_payment', paymentArgs(operationId));
    expect(first).toMatchObject({ outcome: 'unknown', retryable: true, error: { code: 'OUTCOME_UNKNOWN' } });
    // The payment exists at the provider while our record says UNKNOWN.
    const [payment] = await paymentsWithKey(operationId);
    expect(payment).toMatchObject({ tenant: TENANT, amount_minor: 1999 });
    expect(await operationStatus(client, 'request_payment', operationId)).toMatchObject({ status: 'unknown' });

    const report = await stack.workers.reconciler.runOnce();
    expect(report.found).toBeGreaterThanOrEqual(1);
    expect(await operationStatus(client, 'request_payment', operationId)).toMatchObject({
      status: 'succeeded',
      result: { payment_id: payment!.payment_id },
    });

    const retry = await callWrite<Payment>(client, 'request_payment', paymentArgs(operationId));
    expect(retry).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
      result: { payment_id: payment!.payment_id, amount_minor: 1999, currency: 'EUR' },
    });
    expect(retry.first_executed_at).toBeDefined();
    expect(await paymentsWithKey(operationId)).toHaveLength(1);
  });

  it.sequential('fail-before-commit: unknown, the reconciler finds nothing and releases the id, the retry pays once', async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    await armFault(stack, { target: 'payments', mode: 'fail-before-commit' });
    const { answer, outcomes } = await payUntilSettled(operationId);
    expect(outcomes[0]).toBe('unknown');
    // Released, then executed by the retry: a fresh execution, not a replay.
    expect(answer.replayed).toBe(false);
    expect(await paymentsWithKey(operationId)).toEqual([expect.objectContaining({ payment_id: answer.result!.payment_id })]);
  }, 60_000);

  it.sequential('unavailable: a retryable failure with nothing done, the retry pays once', async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    await armFault(stack, { target: 'payments', mode: 'unavailable' });
    const first = await callWrite(client, 'request_payment', paymentArgs(operationId));
    expect(first).toMatchObject({ outcome: 'failed', retryable: true, error: { code: 'DOWNSTREAM_UNAVAILABLE' } });
    expect(await paymentsWithKey(operationId)).toHaveLength(0);
    const { answer } = await payUntilSettled(operationId);
    expect(await paymentsWithKey(operationId)).toEqual([expect.objectContaining({ payment_id: answer.result!.payment_id })]);
  });

  it.sequential('slow: succeeds within the timeout, once', async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    await armFault(stack, { target: 'payments', mode: 'slow', delay_ms: 300 });
    const { answer } = await payUntilSettled(operationId);
    expect(await paymentsWithKey(operationId)).toEqual([expect.objectContaining({ payment_id: answer.result!.payment_id })]);
    expect(await operationStatus(client, 'request_payment', operationId)).toMatchObject({ status: 'succeeded' });
  });

  it.sequential('a declined payment is a terminal failure, replayed to the retry, with nothing paid', async () => {
    const operationId = await issueOperationId(client, 'request_payment');
    const args = { ...paymentArgs(operationId), amount_minor: 50_000_000 };
    const first = await callWrite(client, 'request_payment', args);
    expect(first).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'PAYMENT_DECLINED' } });
    expect(await callWrite(client, 'request_payment', args)).toMatchObject({ outcome: 'failed', replayed: true });
    expect(await paymentsWithKey(operationId)).toHaveLength(0);
  });
});

const outboxTools = [
  {
    tool: 'send_email',
    target: 'mailbox' as const,
    args: (key: string) => ({ idempotency_key: key, to: 'ada@example.com', subject: 'Your order', body: 'It ships today.' }),
    effects: async (eventId: string) => (await sandboxLedger(stack)).emails.filter((e) => e.event_id === eventId),
  },
  {
    tool: 'create_ticket',
    target: 'tickets' as const,
    args: (key: string) => ({ idempotency_key: key, title: 'Printer on fire', description: 'Third floor.', priority: 'urgent' }),
    effects: async (eventId: string) => (await sandboxLedger(stack)).tickets.filter((t) => t.event_id === eventId),
  },
];
const downstreamModes = ['commit-then-timeout', 'fail-before-commit', 'unavailable', 'slow'] as const;

describe.concurrent('send_email and create_ticket (no idempotency downstream: the outbox delivers once)', () => {
  // The two downstreams have separate faults, so their cases run side by side; modes of one target run in turn.
  // A delivery that may have happened is verified only after its request's in-flight window (4 s here), twice per tool.
  it.concurrent.each(outboxTools)(
    '$tool: every fault mode ends with one effect and a delivered event',
    async ({ tool, target, args, effects }) => {
      for (const mode of downstreamModes) {
        const key = newKey();
        await armFault(stack, { target, mode, ...(mode === 'slow' ? { delay_ms: 300 } : {}) });
        const answer = await callWrite<{ status: string; event_id: string }>(client, tool, args(key));
        // The call itself only commits the record and the event: the fault hits the delivery.
        expect(answer, mode).toMatchObject({ outcome: 'succeeded', result: { status: 'queued' } });
        const eventId = answer.result!.event_id;

        const delivery = await settledDelivery(client, tool, key);
        expect(delivery, mode).toMatchObject({ event_id: eventId, status: 'delivered' });
        const made = await effects(eventId);
        expect(made, mode).toHaveLength(1);
        expect(made[0], mode).toMatchObject({ tenant: TENANT });
        // The delivery's result is the downstream's own id of that one effect.
        expect(Object.values(delivery.result ?? {}), mode).toContain(
          'message_id' in made[0]! ? made[0].message_id : (made[0] as { ticket_id: string }).ticket_id,
        );
        expect(await callWrite(client, tool, args(key)), mode).toMatchObject({
          outcome: 'succeeded',
          replayed: true,
          result: { event_id: eventId },
        });
      }
    },
    90_000,
  );

  it.sequential('duplicate-delivery on the queue: the event arrives twice, one email is sent', async () => {
    const key = newKey();
    await armFault(stack, { target: 'queue', mode: 'duplicate-delivery' });
    const answer = await callWrite<{ event_id: string }>(client, 'send_email', outboxTools[0]!.args(key));
    const delivery = await settledDelivery(client, 'send_email', key);
    expect(delivery.status).toBe('delivered');
    // The relay consumed the fault on this event (nothing else was published meanwhile): it went out twice.
    await eventually(
      async () => ((await armedFaults(stack)).some((f) => f.target === 'queue') ? undefined : true),
      'the queue fault to be used',
    );
    expect(await outboxTools[0]!.effects(answer.result!.event_id)).toHaveLength(1);
  });

  it.sequential('a recipient the mailbox refuses: the delivery fails for good, nothing is sent, the record stays succeeded', async () => {
    const key = newKey();
    await callWrite(client, 'send_email', { ...outboxTools[0]!.args(key), to: 'someone@rejected.example' });
    const delivery = await settledDelivery(client, 'send_email', key);
    expect(delivery).toMatchObject({ status: 'failed', error: { code: 'RECIPIENT_REJECTED' } });
    expect(await outboxTools[0]!.effects(delivery.event_id)).toHaveLength(0);
    expect(await operationStatus(client, 'send_email', key)).toMatchObject({ status: 'succeeded' });
  });
});
