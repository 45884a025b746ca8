import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { inject } from 'vitest';
import * as z from 'zod';
import { parseRetryAfter } from '../../client/retry';
import { EnvVars, read, type Env } from '../../lambdas/config';
import { ErrorCode, TerminalToolError, TransientToolError, UncertainToolError } from '../../lambdas/core/errors';
import { quotedText } from '../../lambdas/core/display-text';
import { formatMinorUnits, isPayableCurrency } from '../../lambdas/core/money';
import type { ReconcileFinding } from '../../lambdas/core/reconcile';
import { defineReadTool, ReadToolError } from '../../lambdas/mcp/define-read-tool';
import { defineWriteTool, type WriteToolContext } from '../../lambdas/mcp/define-write-tool';
import { OUTBOX_TOOL_NOTE, outboxToolNeverCommitted, queueEffect, queuedSchema, type OutboxRuntime } from '../../lambdas/mcp/outbox-tool';
import type { ToolDefinition } from '../../lambdas/mcp/tool-types';
import type { DeliveryHandler } from '../../lambdas/outbox/consumer';
import { startLocalStack, type LocalStack, type LocalStackOptions } from '../../local/stack';
import { deferred, orderItem, orderWrite } from './engine';

/**
 * The toolkit's MCP-level tests run on tools of their own, never on the reference endpoint's demo tools: write tools
 * built the documented way (defineWriteTool) over a small real downstream (an HTTP server on 127.0.0.1 in the test's
 * process). Duplicates are counted where effects land: the bookings that downstream holds and the requests it got,
 * or the items in the table; never from the engine's own events or answers.
 */

/** What the downstream does to the next calls (each takes one), as real providers fail. */
export type FixtureFaultMode =
  /** The effect is booked; the answer comes after the caller's timeout. */
  | 'commit-then-timeout'
  /** HTTP 500 before booking: the caller cannot tell whether it happened. */
  | 'fail-before-commit'
  /** HTTP 503 with Retry-After, nothing booked: the caller knows nothing happened. */
  | 'unavailable'
  /** A provider without deduplication that keeps processing what it received: booked `delayMs` after it arrived, even after the caller hung up, and again for the same key. Acting calls only. */
  | 'late-commit';

export interface FixtureFault {
  mode: FixtureFaultMode;
  /** How many calls it applies to (default 1). */
  times?: number;
  /** commit-then-timeout: how long the answer is held; late-commit: how long after arrival it books (default: past the callers' timeout). */
  delayMs?: number;
  /** unavailable: the Retry-After it answers with, in whole seconds (default 1); the fixture tools wait at least that. */
  retryAfterSeconds?: number;
}

/** One effect the downstream holds. */
export interface Booking {
  booking_id: string;
  tenant: string;
  /** The caller's key: the tool's idempotency key (operation id), or an outbox event's id. */
  key: string;
  kind: string;
  payload: Record<string, unknown>;
}

export interface FixtureDownstream {
  url: string;
  /** The effects it holds (of one key, if given): the count a test asserts. */
  bookings(key?: string): Booking[];
  /** Requests asking it to act that reached it (of one key, if given), deduplicated or not. */
  calls(key?: string): number;
  /** Lookups by key it received (of one key, if given). */
  lookups(key?: string): number;
  arm(fault: FixtureFault): void;
  /**
   * Holds the next acting request for `key` once it arrived (counted) until `release()`; then it is handled as any
   * other. `entered` settles when it arrived: a test acts while a call is mid-flight.
   */
  hold(key: string): { entered: Promise<void>; release(): void };
  /** Sends it an acting request as any other caller would (a dead executor's request that got through): its booking. */
  send(booking: Omit<Booking, 'booking_id'>): Promise<Booking>;
  /** The armed faults and how many calls each still applies to. */
  armed(): Array<{ mode: FixtureFaultMode; remaining: number }>;
  /** Settles once every `late-commit` request that arrived so far has booked its effect: then the count is final. */
  landed(): Promise<void>;
  clear(): void;
  stop(): Promise<void>;
}

/** Above this amount a booking is refused (HTTP 422): a business rejection. */
export const FIXTURE_LIMIT_MINOR = 10_000_000;

/**
 * The fixture tools' downstream: books an effect per (tenant, key) and answers a repeat with the first booking
 * (except under `late-commit`), answers "what happened to key K", and takes the armed faults. `holdMs` is how long a
 * `commit-then-timeout` holds its answer unless the fault says (past the callers' timeout).
 */
export async function startFixtureDownstream(options: { holdMs: number }): Promise<FixtureDownstream> {
  const held: Booking[] = [];
  const acting: Array<{ tenant: string; key: string }> = [];
  const asked: Array<{ tenant: string; key: string }> = [];
  const faults: Array<FixtureFault & { remaining: number }> = [];
  const landing = new Set<Promise<Booking>>();
  const holds = new Map<string, { entered: ReturnType<typeof deferred<void>>; released: ReturnType<typeof deferred<void>> }>();
  const holdFor = (key: string) => {
    let gate = holds.get(key);
    if (!gate) holds.set(key, (gate = { entered: deferred<void>(), released: deferred<void>() }));
    return gate;
  };
  const find = (tenant: string, key: string) => held.find((b) => b.tenant === tenant && b.key === key);
  const takeFault = (act: boolean) => {
    const index = faults.findIndex((f) => act || f.mode !== 'late-commit');
    if (index < 0) return undefined;
    const fault = faults[index]!;
    if (--fault.remaining <= 0) faults.splice(index, 1);
    return fault;
  };
  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    if (res.destroyed) return;
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };
  /** Waits `ms` or until the caller hangs up. */
  const hold = (ms: number, req: IncomingMessage) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      req.socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fixture');
    if (req.method === 'GET' && url.pathname === '/bookings') {
      const tenant = url.searchParams.get('tenant') ?? '';
      const key = url.searchParams.get('key') ?? '';
      asked.push({ tenant, key });
      const fault = takeFault(false);
      if (fault?.mode === 'unavailable') return send(res, 503, { error: 'unavailable (injected fault)' }, { 'retry-after': String(fault.retryAfterSeconds ?? 1) });
      if (fault?.mode === 'fail-before-commit') return send(res, 500, { error: 'failed (injected fault)' });
      const booking = find(tenant, key);
      if (fault?.mode === 'commit-then-timeout') await hold(fault.delayMs ?? options.holdMs, req);
      return booking ? send(res, 200, booking) : send(res, 404, { error: 'no booking under this key' });
    }
    if (req.method === 'POST' && url.pathname === '/bookings') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const { tenant, key, kind, payload } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Omit<Booking, 'booking_id'>;
      acting.push({ tenant, key });
      const gate = holds.get(key);
      if (gate) {
        holds.delete(key);
        gate.entered.resolve();
        await gate.released.promise;
      }
      const fault = takeFault(true);
      if (fault?.mode === 'unavailable') return send(res, 503, { error: 'unavailable (injected fault)' }, { 'retry-after': String(fault.retryAfterSeconds ?? 1) });
      if (fault?.mode === 'fail-before-commit') return send(res, 500, { error: 'failed (injected fault)' });
      if (typeof payload.amount_minor === 'number' && payload.amount_minor > FIXTURE_LIMIT_MINOR)
        return send(res, 422, { error: `amounts above ${FIXTURE_LIMIT_MINOR} minor units are refused` });
      const book = (): Booking => {
        const booking: Booking = { booking_id: `bk-${randomUUID()}`, tenant, key, kind, payload };
        held.push(booking);
        return booking;
      };
      if (fault?.mode === 'late-commit') {
        // Not abortable: it books whether or not the caller is still there.
        const late = delay(fault.delayMs ?? options.holdMs).then(book);
        landing.add(late);
        try {
          return send(res, 201, await late);
        } finally {
          landing.delete(late);
        }
      }
      const booking = find(tenant, key) ?? book();
      if (fault?.mode === 'commit-then-timeout') await hold(fault.delayMs ?? options.holdMs, req);
      return send(res, 201, booking);
    }
    send(res, 404, { error: 'no such route' });
  }

  const server = createServer((req, res) => void handle(req, res).catch((err) => send(res, 500, { error: String(err) })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const count = (list: Array<{ key: string }>, key?: string) => (key === undefined ? list.length : list.filter((c) => c.key === key).length);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    bookings: (key) => held.filter((b) => key === undefined || b.key === key),
    calls: (key) => count(acting, key),
    lookups: (key) => count(asked, key),
    arm: (fault) => void faults.push({ ...fault, remaining: fault.times ?? 1 }),
    hold(key) {
      const gate = holdFor(key);
      return { entered: gate.entered.promise, release: () => gate.released.resolve() };
    },
    async send(booking) {
      const response = await fetch(`${url}/bookings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(booking) });
      if (response.status !== 201) throw new Error(`the fixture downstream answered ${response.status}: ${await response.text()}`);
      return (await response.json()) as Booking;
    },
    armed: () => faults.map(({ mode, remaining }) => ({ mode, remaining })),
    landed: async () => void (await Promise.all(landing)),
    clear: () => void faults.splice(0),
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The fixture tools' client of their downstream: every transport failure classified by what it says of the effect. */
function downstreamClient(baseUrl: string, timeoutMs: number) {
  async function request(init: { method: 'GET' | 'POST'; path: string; body?: unknown }, signal: AbortSignal) {
    const bounded = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
    try {
      const response = await fetch(`${baseUrl}${init.path}`, {
        method: init.method,
        headers: init.body === undefined ? {} : { 'content-type': 'application/json' },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: bounded,
      });
      return {
        status: response.status,
        retryAfterMs: parseRetryAfter(response.headers.get('retry-after'), Date.now()),
        body: (await response.json()) as Record<string, unknown>,
      };
    } catch (err) {
      if (bounded.aborted) throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'the fixture downstream did not answer in time', { cause: err });
      throw new UncertainToolError('DOWNSTREAM_CONNECTION_LOST', 'the connection to the fixture downstream was lost', { cause: err });
    }
  }
  return {
    async book(booking: Omit<Booking, 'booking_id'>, signal: AbortSignal): Promise<Booking> {
      const { status, retryAfterMs, body } = await request({ method: 'POST', path: '/bookings', body: booking }, signal);
      if (status === 201) return body as unknown as Booking;
      if (status === 503) throw new TransientToolError(ErrorCode.TRANSIENT_FAILURE, 'the fixture downstream is unavailable; nothing was done', retryAfterMs ?? 1000);
      if (status >= 500) throw new UncertainToolError('DOWNSTREAM_ERROR', `the fixture downstream failed (HTTP ${status}); the outcome is unknown`);
      throw new TerminalToolError('DOWNSTREAM_REJECTED', `the fixture downstream refused the request: ${String(body.error)}`);
    },
    async find(tenant: string, key: string, signal: AbortSignal): Promise<ReconcileFinding> {
      const query = new URLSearchParams({ tenant, key });
      let answer: { status: number; body: Record<string, unknown> };
      try {
        answer = await request({ method: 'GET', path: `/bookings?${query}` }, signal);
      } catch (err) {
        return { kind: 'unreachable', reason: (err as Error).message };
      }
      if (answer.status === 200) return { kind: 'found', result: answer.body };
      if (answer.status === 404) return { kind: 'absent' };
      return { kind: 'unreachable', reason: `the fixture downstream answered HTTP ${answer.status}` };
    },
  };
}

/** The fixture tools' names (their records' storage keys name them). */
export const FixtureTool = {
  /** Pays through the downstream; server-issued operation ids; the person approves each payment (`confirmation: 'approval'`). */
  payment: 'fixture_payment',
  /** Books through the downstream under the client's idempotency_key; reconciled by asking the downstream. */
  write: 'fixture_write',
  /** Commits its order item with the record, in one request (`effect: 'local'`). */
  order: 'fixture_order',
  /** Queues a notification on the outbox; the consumer books it at the downstream under the event id. */
  notify: 'fixture_notify',
} as const;

/** The outbox event type of `fixture_notify`, delivered by `fixtureDeliveries`. */
export const FIXTURE_NOTIFY_EVENT = 'fixture.notify';

/** The result of the fixture tools that book at the downstream. */
const bookedSchema = z.object({ booking_id: z.string(), key: z.string() });
const paymentResult = z.object({ payment_id: z.string(), amount_minor: z.number().int(), currency: z.string(), payee_id: z.string() });

const found = (finding: ReconcileFinding, view: (b: Booking) => unknown): ReconcileFinding =>
  finding.kind === 'found' ? { kind: 'found', result: view(finding.result as Booking) } : finding;
const paymentView = (b: Booking) => ({
  payment_id: b.booking_id,
  amount_minor: b.payload.amount_minor as number,
  currency: b.payload.currency as string,
  payee_id: b.payload.payee_id as string,
});

/** The fixture tools over `downstream`, each downstream call bounded by `timeoutMs` (the deployment's DOWNSTREAM_TIMEOUT_MS). */
export function fixtureTools(downstream: Pick<FixtureDownstream, 'url'>, timeoutMs: number) {
  const client = downstreamClient(downstream.url, timeoutMs);
  const payment = defineWriteTool({
    name: FixtureTool.payment,
    title: 'Fixture payment',
    description: 'Test tool: pays a payee through the fixture downstream; the person approves each payment.',
    input: {
      amount_minor: z.number().int().positive().max(1_000_000_000),
      currency: z.string().refine(isPayableCurrency, 'must be an ISO 4217 currency code'),
      payee_id: z.string().min(1).max(128),
      memo: z.string().max(200).optional(),
    },
    result: paymentResult,
    annotations: { destructiveHint: true, openWorldHint: true },
    keySource: 'operation_id',
    confirmation: 'approval',
    summarize: ({ amount_minor, currency, payee_id, memo }) =>
      `Pay ${formatMinorUnits(amount_minor, currency)} to ${payee_id}${memo ? ` (memo: ${quotedText(memo)})` : ''}`,
    async execute(args, ctx) {
      return { result: paymentView(await client.book({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind: 'payment', payload: args }, ctx.signal)) };
    },
    reconcile: async ({ record, signal }) => found(await client.find(record.tenant, record.idempotencyKey, signal), paymentView),
  });
  const write = defineWriteTool({
    name: FixtureTool.write,
    title: 'Fixture write',
    description: 'Test tool: books a note at the fixture downstream under the idempotency key.',
    input: { note: z.string().min(1).max(200) },
    result: bookedSchema,
    annotations: { destructiveHint: false, openWorldHint: true },
    async execute(args, ctx) {
      const booking = await client.book({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind: 'write', payload: args }, ctx.signal);
      return { result: { booking_id: booking.booking_id, key: booking.key } };
    },
    reconcile: async ({ record, signal }) =>
      found(await client.find(record.tenant, record.idempotencyKey, signal), (b) => ({ booking_id: b.booking_id, key: b.key })),
  });
  const order = defineWriteTool({
    name: FixtureTool.order,
    title: 'Fixture order',
    description: 'Test tool: records an order in the table, with the call, in one request.',
    input: { item: z.string().min(1).max(64), quantity: z.number().int().positive().max(1000) },
    result: z.object({ order_id: z.string(), item: z.string(), quantity: z.number().int() }),
    annotations: { destructiveHint: false, openWorldHint: false },
    idempotency: { reexecuteSafe: true },
    effect: 'local',
    async execute(args, ctx) {
      const orderId = fixtureOrderId(ctx.idempotencyKey);
      return { result: { order_id: orderId, ...args }, writes: [orderWrite(ctx.tenant, orderId, args)] };
    },
  });
  const notify = defineWriteTool({
    name: FixtureTool.notify,
    title: 'Fixture notification',
    description: `Test tool: queues a notification. ${OUTBOX_TOOL_NOTE}`,
    input: { to: z.string().min(1).max(128), text: z.string().min(1).max(2000) },
    result: queuedSchema,
    annotations: { destructiveHint: false, openWorldHint: true },
    idempotency: { reexecuteSafe: true },
    effect: 'local',
    execute: async (args, ctx: WriteToolContext<OutboxRuntime>) => queueEffect(FIXTURE_NOTIFY_EVENT, args, ctx),
    reconcile: outboxToolNeverCommitted,
  });
  const deliveries: Record<string, DeliveryHandler> = {
    [FIXTURE_NOTIFY_EVENT]: {
      deliver: (m, ctx) => client.book({ tenant: m.tenant, key: m.event_id, kind: 'notify', payload: m.payload }, ctx.signal),
      verify: (m, ctx) => client.find(m.tenant, m.event_id, ctx.signal),
    },
  };
  return { tools: [payment, write, order, notify] as readonly ToolDefinition[], deliveries };
}

/** The order id `fixture_order` gives a key (one order per key). */
export const fixtureOrderId = (idempotencyKey: string) => `fo-${idempotencyKey}`;

/** The order `fixture_order` committed for this key, as stored (undefined if none). */
export const fixtureOrder = (stack: LocalStack, tenant: string, idempotencyKey: string) =>
  orderItem(stack.services.doc, stack.config.tableName, tenant, fixtureOrderId(idempotencyKey));

export type FixtureStack = LocalStack & {
  downstream: FixtureDownstream;
  /** Every tool it serves: the fixture tools and the test's own (a second reconciler or worker gets the same). */
  tools: readonly ToolDefinition[];
  /** The consumer's deliveries of the fixture tools' events (a second consumer gets the same). */
  deliveries: Record<string, DeliveryHandler>;
};

/**
 * The local stack on the run's shared DynamoDB Local serving the fixture tools (and `options.tools` beside them),
 * its consumer delivering their outbox events, and their downstream. As in test/support/mcp.ts's startTestStack,
 * 2025-era clients confirm `fixture_payment` on their side unless `env` says otherwise.
 */
export async function startFixtureStack(options: LocalStackOptions = {}): Promise<FixtureStack> {
  process.env.DYNAMODB_ENDPOINT = inject('dynamodbEndpoint');
  const env: Env = { CONFIRMATION_OPT_OUT_TOOLS: FixtureTool.payment, ...options.env };
  const timeoutMs = read({ ...process.env, ...env }, EnvVars.downstreamTimeoutMs);
  const downstream = await startFixtureDownstream({ holdMs: timeoutMs + 1000 });
  const fixture = fixtureTools(downstream, timeoutMs);
  try {
    const tools = [...fixture.tools, ...(options.tools ?? [])];
    const deliveries = { ...fixture.deliveries, ...options.workers?.deliveries };
    const stack = await startLocalStack({ ...options, env, tools, workers: { ...options.workers, deliveries } });
    return {
      ...stack,
      downstream,
      tools,
      deliveries,
      async stop() {
        await stack.stop();
        await downstream.stop();
      },
    };
  } catch (err) {
    await downstream.stop();
    throw err;
  }
}

/** fixture_payment takes request_payment's arguments: 12.50 EUR to payee-7, memo "rent". */
export { paymentArgs as fixturePaymentArgs } from './side-effects';

// --- mcp-migrate: a read tool over the fixture downstream ---

/** The booking `fixture_get_booking` answers with. */
const bookingView = z.object({ booking_id: z.string(), key: z.string(), tenant: z.string(), kind: z.string() });

/**
 * `fixture_get_booking`: a read tool (defineReadTool) asking the fixture downstream for the caller's booking under a
 * key, scoped to the token's tenant as every read tool must be: another tenant's booking is NOT_FOUND. `downstreamUrl`
 * is read on each call (the downstream starts with the stack the tool is passed to). Each call is one lookup there.
 */
export function fixtureBookingReadTool(downstreamUrl: () => string): ToolDefinition {
  return defineReadTool({
    name: 'fixture_get_booking',
    title: 'Fixture booking',
    description: "Test tool: reads the caller's booking under a key at the fixture downstream.",
    input: { key: z.string().min(1).max(128) },
    result: bookingView,
    annotations: { openWorldHint: true },
    async execute({ key }, { caller }) {
      const response = await fetch(`${downstreamUrl()}/bookings?${new URLSearchParams({ tenant: caller.tenant, key })}`);
      if (response.status === 404) throw new ReadToolError('NOT_FOUND', 'There is no booking under this key.');
      if (!response.ok) throw new ReadToolError('DOWNSTREAM_ERROR', `The fixture downstream answered HTTP ${response.status}.`);
      const { booking_id, tenant, kind } = (await response.json()) as Booking;
      return { booking_id, key, tenant, kind };
    },
  }) as ToolDefinition;
}
