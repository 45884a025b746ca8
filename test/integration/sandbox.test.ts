import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../support/local-stack';
import { openSandboxStore } from '../../reference/sandbox/sandbox-store';
import { newKey } from '../support/engine';
import { startTestStack } from '../support/mcp';
import { armedFaults, armFault, clearFaults, eventually, sandboxLedger } from '../support/side-effects';

/** The sandbox downstreams behave like the real systems they stand for, and the faults API refuses nonsense. */
let stack: LocalStack;
const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});

beforeAll(async () => {
  stack = await startTestStack({ workers: { relayPoller: false, consumerPoller: false, reconcilerTimer: false } });
});
afterAll(() => stack?.stop());

describe('POST /sandbox/faults', () => {
  it.each([
    [{ target: 'payments' }, /mode/],
    [{ target: 'printer', mode: 'unavailable' }, /target/],
    [{ target: 'payments', mode: 'explode' }, /mode/],
    [{ target: 'queue', mode: 'unavailable' }, /mode: target queue takes only duplicate-delivery/],
    [{ target: 'mailbox', mode: 'duplicate-delivery' }, /mode: duplicate-delivery applies to target queue only/],
    [{ target: 'tickets', mode: 'slow', times: 0 }, /times/],
    [{ target: 'tickets', mode: 'slow', times: 1.5 }, /times/],
    [{ target: 'tickets', mode: 'slow', delay_ms: -1 }, /delay_ms/],
    [{ target: 'tickets', mode: 'slow', colour: 'red' }, /colour|Unrecognized/i],
    ['{not json', /JSON/],
  ])('refuses %j with a 400 naming the problem', async (body, message) => {
    const response = await fetch(`${stack.url}/sandbox/faults`, json(body));
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('invalid_fault');
    expect(error.message).toMatch(message);
  });

  it('arms, lists (with the uses left), replaces per target and clears faults', async () => {
    await armFault(stack, { target: 'payments', mode: 'unavailable', times: 2 });
    await armFault(stack, { target: 'queue', mode: 'duplicate-delivery' });
    await armFault(stack, { target: 'payments', mode: 'slow', times: 3, delay_ms: 10 });
    expect(await armedFaults(stack)).toEqual(
      expect.arrayContaining([
        { target: 'payments', mode: 'slow', remaining: 3, delay_ms: 10 },
        { target: 'queue', mode: 'duplicate-delivery', remaining: 1 },
      ]),
    );
    await clearFaults(stack);
    expect(await armedFaults(stack)).toEqual([]);
  });
});

describe('the downstreams', () => {
  const payments = `/sandbox/payments/v1/payments`;

  it('payments: deduplicated on Idempotency-Key (a replay is marked), refused for another body, found by key', async () => {
    const key = newKey();
    const body = { amount_minor: 250, currency: 'EUR', payee_id: 'payee-1', metadata: { tenant: 'tenant-x' } };
    const first = await fetch(`${stack.url}${payments}`, json(body, { 'idempotency-key': key }));
    expect(first.status).toBe(201);
    const created = (await first.json()) as { payment_id: string };
    const again = await fetch(`${stack.url}${payments}`, json(body, { 'idempotency-key': key }));
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toMatchObject({ payment_id: created.payment_id });
    const other = await fetch(`${stack.url}${payments}`, json({ ...body, amount_minor: 251 }, { 'idempotency-key': key }));
    expect(other.status).toBe(422);

    const found = await fetch(`${stack.url}${payments}?idempotency_key=${key}`);
    expect(await found.json()).toMatchObject({ payment_id: created.payment_id, amount_minor: 250 });
    expect((await fetch(`${stack.url}${payments}?idempotency_key=${newKey()}`)).status).toBe(404);
    expect((await fetch(`${stack.url}${payments}`, json(body))).status).toBe(400); // no key, no payment

    const entries = (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === key);
    expect(entries).toEqual([expect.objectContaining({ tenant: 'tenant-x', payment_id: created.payment_id })]);
  });

  it('tickets: no idempotency (two posts, two tickets), searchable by external id', async () => {
    const externalId = `evt_${newKey()}`;
    const body = { title: 'T', description: 'D', priority: 'low', external_id: externalId, metadata: { tenant: 'tenant-y' } };
    for (let i = 0; i < 2; i++) expect((await fetch(`${stack.url}/sandbox/tickets/v1/tickets`, json(body))).status).toBe(201);
    const search = (await (await fetch(`${stack.url}/sandbox/tickets/v1/tickets?external_id=${externalId}`)).json()) as {
      tickets: unknown[];
    };
    expect(search.tickets).toHaveLength(2);
    expect((await sandboxLedger(stack)).tickets.filter((t) => t.event_id === externalId)).toEqual([
      expect.objectContaining({ tenant: 'tenant-y' }),
      expect.objectContaining({ tenant: 'tenant-y' }),
    ]);
  });

  it('late-commit: applied delay_ms after arrival though the caller hung up, not deduplicated, found by key once booked; lookups leave it armed', async () => {
    const key = newKey();
    const body = { amount_minor: 700, currency: 'EUR', payee_id: 'payee-late', metadata: { tenant: 'tenant-late' } };
    await armFault(stack, { target: 'payments', mode: 'late-commit', times: 2, delay_ms: 400 });
    const lookup = () => fetch(`${stack.url}${payments}?idempotency_key=${key}`);
    // The caller gives up long before the provider books.
    const hungUp = await fetch(`${stack.url}${payments}`, {
      ...json(body, { 'idempotency-key': key }),
      signal: AbortSignal.timeout(50),
    }).catch((err: Error) => err);
    expect(hungUp).toBeInstanceOf(Error);
    expect((await lookup()).status).toBe(404); // not booked yet, and the lookup did not use the fault
    expect(await armedFaults(stack)).toEqual([expect.objectContaining({ mode: 'late-commit', remaining: 1 })]);
    const ofKey = async () => (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === key);
    await eventually(async () => ((await ofKey()).length === 1 ? true : undefined), 'the late payment to be booked');
    const booked = (await (await lookup()).json()) as { payment_id: string };
    expect(booked.payment_id).toBe((await ofKey())[0]!.payment_id);
    // The same key again: booked again (this provider does not deduplicate), and the lookup still finds the first.
    const again = await fetch(`${stack.url}${payments}`, json(body, { 'idempotency-key': key }));
    expect(again.status).toBe(201);
    expect(await ofKey()).toHaveLength(2);
    expect(await (await lookup()).json()).toMatchObject({ payment_id: booked.payment_id });

    const reference = `evt_${newKey()}`;
    await armFault(stack, { target: 'mailbox', mode: 'late-commit', delay_ms: 300 });
    const mail = {
      from: 'shop@example.com',
      to: 'ada@example.com',
      subject: 'S',
      body: 'B',
      reference,
      metadata: { tenant: 'tenant-late' },
    };
    await fetch(`${stack.url}/sandbox/mailbox/v1/messages`, { ...json(mail), signal: AbortSignal.timeout(50) }).catch(() => undefined);
    await eventually(
      async () => ((await sandboxLedger(stack)).emails.some((e) => e.event_id === reference) ? true : undefined),
      'the late email to be sent',
    );
  });

  it('faults apply to the next calls only, look-ups included, and live in DynamoDB (any process sees them)', async () => {
    await armFault(stack, { target: 'payments', mode: 'unavailable', times: 2 });
    const lookup = () => fetch(`${stack.url}${payments}?idempotency_key=${newKey()}`);
    const first = await lookup();
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).toBe('1');
    await armFault(stack, { target: 'payments', mode: 'fail-before-commit', times: 1 });
    expect((await lookup()).status).toBe(500);
    expect((await lookup()).status).toBe(404);
    // The armed faults are items in the sandbox table, not this server's memory.
    await armFault(stack, { target: 'tickets', mode: 'unavailable' });
    expect(await openSandboxStore(stack.services, stack.referenceConfig)!.takeFault('tickets')).toMatchObject({
      mode: 'unavailable',
      remaining: 0,
    });
    expect(await openSandboxStore(stack.services, stack.referenceConfig)!.takeFault('tickets')).toBeUndefined();
  });
});
