import { createHash } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Hono, type Context } from 'hono';
import * as z from 'zod';
import canonicalize from 'canonicalize';
import type { Clock } from 'idempotent-mcp/engine';
import { faultRequestSchema, type DownstreamTarget } from './faults';
import { sandboxId, type PaymentEntry, type SandboxStore } from './sandbox-store';

export interface SandboxDownstreamOptions {
  store: SandboxStore;
  clock: Clock;
  /** How long `commit-then-timeout` holds an answer unless the fault says: past the callers' downstream timeout. */
  defaultHoldMs: number;
  /** How long `slow` waits unless the fault says. */
  defaultSlowMs: number;
}

/** Payments above this are declined (a business rejection to try the terminal path with). */
const SANDBOX_PAYMENT_LIMIT_MINOR = 10_000_000;
/** Mail to this domain is refused by the mailbox (a permanent delivery failure). */
const SANDBOX_REJECTED_EMAIL_DOMAIN = 'rejected.example';

const metadataSchema = z.object({ tenant: z.string().max(256).optional() }).optional();
const paymentBody = z.object({
  amount_minor: z.number().int().positive(),
  currency: z.string().regex(/^[A-Z]{3}$/),
  payee_id: z.string().min(1).max(128),
  memo: z.string().max(500).optional(),
  metadata: metadataSchema,
});
const ticketBody = z.object({
  title: z.string().min(1).max(300),
  description: z.string().max(20_000),
  priority: z.enum(['low', 'normal', 'high', 'urgent']),
  external_id: z.string().max(256).optional(),
  metadata: metadataSchema,
});
const messageBody = z.object({
  from: z.string().min(3).max(320),
  to: z.email(),
  subject: z.string().max(998),
  body: z.string().max(200_000),
  reference: z.string().max(256).optional(),
  metadata: metadataSchema,
});

const problem = (c: Context, status: 400 | 402 | 404 | 422 | 500 | 503, code: string, message: string) =>
  c.json({ error: { code, message } }, status);

/** Waits `ms`, or until the caller hangs up. */
const abortableSleep = (ms: number, signal: AbortSignal) => delay(ms, undefined, { signal }).catch(() => {});

async function readJson(c: Context): Promise<unknown> {
  try {
    return await c.req.json();
  } catch {
    return undefined;
  }
}

function paymentView(p: PaymentEntry) {
  return {
    payment_id: p.payment_id,
    status: p.status,
    amount_minor: p.amount_minor,
    currency: p.currency,
    payee_id: p.payee_id,
    ...(p.memo === undefined ? {} : { memo: p.memo }),
    created_at: p.created_at,
  };
}

/** The sandbox downstreams' sections of GET /sandbox/ledger, tenant and key (or event id) on every entry. */
export async function sandboxLedger(store: SandboxStore) {
  const [payments, tickets, emails] = await Promise.all([store.payments(), store.tickets(), store.emails()]);
  return { payments, tickets, emails };
}

/**
 * Three downstreams with the semantics real ones have, each subject to the armed faults:
 * a payments provider that deduplicates on `Idempotency-Key` (except under `late-commit`) and answers "what
 * happened to key K",
 * a ticket system and a mailbox that do not deduplicate (they store the reference they are given and can be
 * searched by it). Mounted under /sandbox next to the ledger and the faults API.
 */
export function createSandboxDownstreams(options: SandboxDownstreamOptions): Hono {
  const { store, clock } = options;
  const app = new Hono();
  const now = () => new Date(clock()).toISOString();

  /**
   * Applies the next armed fault of `target` around the call's commit. `commit` is told whether to deduplicate:
   * under `late-commit` the downstream acts on every request it receives. A lookup (`act` false) never takes a
   * `late-commit` fault: that fault is about the calls that act.
   */
  async function faulted(
    c: Context,
    target: DownstreamTarget,
    commit: (how: { deduplicate: boolean; receivedAt: string }) => Promise<Response>,
    act = true,
  ): Promise<Response> {
    // Kept with the entry: under late-commit the effect is applied well after its request arrived.
    const receivedAt = now();
    const fault = await store.takeFault(target, act ? {} : { except: ['late-commit'] });
    const signal = c.req.raw.signal;
    switch (fault?.mode) {
      case 'unavailable':
        c.header('Retry-After', '1');
        return problem(c, 503, 'unavailable', `the ${target} sandbox is unavailable (injected fault)`);
      case 'fail-before-commit':
        return problem(c, 500, 'internal_error', `the ${target} sandbox failed before committing (injected fault)`);
      case 'slow':
        await abortableSleep(fault.delay_ms ?? options.defaultSlowMs, signal);
        // The caller hung up while we were slow: like a server honouring client disconnects, do nothing.
        if (signal.aborted) return problem(c, 503, 'client_gone', 'the caller hung up before the call was handled');
        break;
      case 'late-commit':
        // Not abortable: like a plain HTTP provider, it does not notice the caller hanging up and books anyway.
        await delay(fault.delay_ms ?? options.defaultHoldMs);
        return commit({ deduplicate: false, receivedAt });
    }
    const response = await commit({ deduplicate: true, receivedAt });
    if (fault?.mode === 'commit-then-timeout') await abortableSleep(fault.delay_ms ?? options.defaultHoldMs, signal);
    return response;
  }

  app.post('/payments/v1/payments', async (c) => {
    const key = c.req.header('idempotency-key');
    if (!key || key.length > 255)
      return problem(c, 400, 'idempotency_key_required', 'the Idempotency-Key header is required (1 to 255 characters)');
    const parsed = paymentBody.safeParse(await readJson(c));
    if (!parsed.success)
      return problem(c, 400, 'invalid_request', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const { metadata, ...payment } = parsed.data;
    return faulted(c, 'payments', async ({ deduplicate, receivedAt }) => {
      if (payment.amount_minor > SANDBOX_PAYMENT_LIMIT_MINOR)
        return problem(c, 402, 'payment_declined', `amounts above ${SANDBOX_PAYMENT_LIMIT_MINOR} minor units are declined`);
      const entry: PaymentEntry = {
        payment_id: sandboxId('pay', clock()),
        tenant: metadata?.tenant ?? 'unknown',
        idempotency_key: key,
        ...payment,
        status: 'succeeded',
        request_hash: createHash('sha256')
          .update(canonicalize(payment) ?? '')
          .digest('hex'),
        received_at: receivedAt,
        created_at: now(),
      };
      if (!deduplicate) {
        await store.bookPayment(entry);
        return c.json(paymentView(entry), 201);
      }
      const stored = await store.putPayment(entry);
      if (stored.created) return c.json(paymentView(entry), 201);
      if (stored.existing.request_hash !== entry.request_hash)
        return problem(c, 422, 'idempotency_key_reused', 'this Idempotency-Key was used with another request');
      // Stripe's convention: the first answer again, marked as a replay.
      c.header('Idempotent-Replayed', 'true');
      return c.json(paymentView(stored.existing), 200);
    });
  });

  app.get('/payments/v1/payments', async (c) => {
    const key = c.req.query('idempotency_key');
    if (!key) return problem(c, 400, 'invalid_request', 'idempotency_key is required');
    return faulted(
      c,
      'payments',
      async () => {
        const payment = await store.paymentByKey(key);
        return payment ? c.json(paymentView(payment)) : problem(c, 404, 'not_found', 'no payment with this idempotency key');
      },
      false,
    );
  });

  app.post('/tickets/v1/tickets', async (c) => {
    const parsed = ticketBody.safeParse(await readJson(c));
    if (!parsed.success)
      return problem(c, 400, 'invalid_request', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const { metadata, external_id, ...ticket } = parsed.data;
    return faulted(c, 'tickets', async ({ receivedAt }) => {
      const entry = {
        ticket_id: sandboxId('tck', clock()),
        tenant: metadata?.tenant ?? 'unknown',
        event_id: external_id,
        ...ticket,
        received_at: receivedAt,
        created_at: now(),
      };
      await store.addTicket(entry);
      return c.json({ ticket_id: entry.ticket_id, external_id, created_at: entry.created_at }, 201);
    });
  });

  app.get('/tickets/v1/tickets', async (c) => {
    const externalId = c.req.query('external_id');
    if (!externalId) return problem(c, 400, 'invalid_request', 'external_id is required');
    return faulted(
      c,
      'tickets',
      async () => {
        const tickets = (await store.tickets()).filter((t) => t.event_id === externalId);
        return c.json({ tickets: tickets.map((t) => ({ ticket_id: t.ticket_id, external_id: t.event_id, created_at: t.created_at })) });
      },
      false,
    );
  });

  app.post('/mailbox/v1/messages', async (c) => {
    const parsed = messageBody.safeParse(await readJson(c));
    if (!parsed.success)
      return problem(c, 400, 'invalid_request', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const { metadata, reference, body: _body, ...message } = parsed.data;
    return faulted(c, 'mailbox', async ({ receivedAt }) => {
      if (message.to.toLowerCase().endsWith(`@${SANDBOX_REJECTED_EMAIL_DOMAIN}`))
        return problem(c, 422, 'recipient_rejected', `mail to ${SANDBOX_REJECTED_EMAIL_DOMAIN} is refused`);
      const entry = {
        message_id: sandboxId('msg', clock()),
        tenant: metadata?.tenant ?? 'unknown',
        event_id: reference,
        ...message,
        received_at: receivedAt,
        created_at: now(),
      };
      await store.addEmail(entry);
      return c.json({ message_id: entry.message_id, reference, created_at: entry.created_at }, 201);
    });
  });

  app.get('/mailbox/v1/messages', async (c) => {
    const reference = c.req.query('reference');
    if (!reference) return problem(c, 400, 'invalid_request', 'reference is required');
    return faulted(
      c,
      'mailbox',
      async () => {
        const messages = (await store.emails()).filter((m) => m.event_id === reference);
        return c.json({ messages: messages.map((m) => ({ message_id: m.message_id, reference: m.event_id, created_at: m.created_at })) });
      },
      false,
    );
  });

  app.post('/faults', async (c) => {
    const body = await readJson(c);
    if (body === undefined) return problem(c, 400, 'invalid_fault', 'the body must be JSON: { "target", "mode", "times"?, "delay_ms"? }');
    const parsed = faultRequestSchema.safeParse(body);
    if (!parsed.success)
      return problem(
        c,
        400,
        'invalid_fault',
        parsed.error.issues.map((issue) => `${issue.path.join('.') || 'fault'}: ${issue.message}`).join('; '),
      );
    return c.json({ fault: await store.armFault(parsed.data) }, 201);
  });
  app.get('/faults', async (c) => c.json({ faults: await store.listFaults() }));
  app.delete('/faults', async (c) => {
    await store.clearFaults();
    return c.body(null, 204);
  });

  return app;
}
