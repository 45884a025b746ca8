import { paginateScan } from '@aws-sdk/lib-dynamodb';
import { inject } from 'vitest';
import * as z from 'zod';
import { EnvVars } from '../../lambdas/config';
import { read, type Env } from '../../lambdas/env-var';
import { quotedText } from '../../lambdas/core/display-text';
import { formatMinorUnits, isPayableCurrency } from '../../lambdas/core/money';
import { defineReadTool, ReadToolError } from '../../lambdas/mcp/define-read-tool';
import { defineWriteTool, type WriteToolContext } from '../../lambdas/mcp/define-write-tool';
import { OUTBOX_TOOL_NOTE, outboxToolNeverCommitted, queueEffect, queuedSchema, type OutboxRuntime } from '../../lambdas/mcp/outbox-tool';
import type { ToolDefinition } from '../../lambdas/mcp/tool-types';
import type { DeliveryHandler } from '../../lambdas/outbox/consumer';
import { startLocalStack, type LocalStack, type LocalStackOptions } from './local-stack';
import { orderItem, orderWrite } from './engine';
import { bookingClients } from './fixture-clients-module';
import { fixtureDownstreamClient, found, startFixtureDownstream, type Booking, type FixtureDownstream } from './fixture-downstream';

export {
  FIXTURE_LIMIT_MINOR,
  fixtureDownstreamClient,
  startFixtureDownstream,
  type Booking,
  type FixtureDownstream,
  type FixtureFault,
  type FixtureFaultMode,
} from './fixture-downstream';

/**
 * The toolkit's MCP-level tests run on tools of their own, never on the reference endpoint's demo tools: write tools
 * built the documented way (defineWriteTool) over a small real downstream (an HTTP server on 127.0.0.1 in the test's
 * process). Duplicates are counted where effects land: the bookings that downstream holds and the requests it got,
 * or the items in the table; never from the engine's own events or answers.
 */

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

const paymentView = (b: Booking) => ({
  payment_id: b.booking_id,
  amount_minor: b.payload.amount_minor as number,
  currency: b.payload.currency as string,
  payee_id: b.payload.payee_id as string,
});

/** The fixture tools over `downstream`, each downstream call bounded by `timeoutMs` (the deployment's DOWNSTREAM_TIMEOUT_MS). */
export function fixtureTools(downstream: Pick<FixtureDownstream, 'url'>, timeoutMs: number) {
  const client = fixtureDownstreamClient(downstream.url, timeoutMs);
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
      return {
        result: paymentView(await client.book({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind: 'payment', payload: args }, ctx.signal)),
      };
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

/**
 * Every item of the stack's table that names `key` (an idempotency key or operation id, unique to one test): the
 * record of each call under it and what the calls committed with it. Counted in the table itself, not through the
 * store's reads, so a second record or a second order under another storage key would show.
 */
export async function tableItemsNaming(stack: LocalStack, key: string): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  for await (const page of paginateScan({ client: stack.services.doc }, { TableName: stack.config.tableName, ConsistentRead: true }))
    items.push(...(page.Items ?? []).filter((item) => JSON.stringify(item).includes(key)));
  return items;
}

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
    // Its services hold the clients of test/support/fixture-clients-module.ts's tools, for this downstream (as that
    // module's `withClients` adds them in a deployed function), so a test may serve those tools too.
    const withClients = <B extends object>(services: B) =>
      (options.withClients ?? ((given: B) => given))({ ...services, ...bookingClients(downstream.url, timeoutMs) });
    const stack = await startLocalStack({ ...options, env, tools, withClients, workers: { ...options.workers, deliveries } });
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
