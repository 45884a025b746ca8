import * as z from 'zod';
import canonicalize from 'canonicalize';
import { ErrorCode, TerminalToolError } from 'idempotent-mcp/engine';
import { defineWriteTool, type WriteToolContext } from 'idempotent-mcp/mcp';
import { getOrder, identifier, orderIdFor, orderLineSchema, orderSchema, putOrderWrite, type Order } from './orders';
import type { OrderServices } from './services';

export const createOrderTool = defineWriteTool({
  name: 'create_order',
  title: 'Create order',
  description: 'Creates an order for a customer. Returns the order with its order_id.',
  input: {
    customer_id: identifier(128).describe('The customer placing the order.'),
    items: z.array(orderLineSchema).min(1).max(100).describe('The order lines.'),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR')
      .describe('ISO 4217 currency code, for example EUR.'),
  },
  result: orderSchema,
  // Adds an order in this service's own table: nothing destroyed, no outside system.
  annotations: { destructiveHint: false, openWorldHint: false },
  // The order commits atomically with the SUCCEEDED record, so a stale execution cannot have left an order
  // behind: re-running it is safe.
  idempotency: { reexecuteSafe: true },
  // Its whole effect is the order item: record and order commit in one request.
  effect: 'local',
  async execute(args, ctx: WriteToolContext<OrderServices>) {
    const orderId = orderIdFor(ctx.tenant, ctx.tool, ctx.idempotencyKey);
    const order: Order = { order_id: orderId, status: 'created', ...args, created_at: new Date(ctx.now()).toISOString() };
    const write = putOrderWrite(ctx.tenant, ctx.idempotencyKey, order);
    // A key whose record has expired may come back: its order already exists, and the key still names only it. On
    // the one-request path the order's put condition finds it instead of a read, and the claimed path runs this again.
    if (ctx.path === 'one_request') return { result: order, writes: [write] };
    const existing = await getOrder(ctx.services.doc, ctx.services.tableName, ctx.tenant, orderId);
    if (existing) {
      const same = (o: Order) => canonicalize({ customer_id: o.customer_id, items: o.items, currency: o.currency });
      if (same(existing) === same(order)) return { result: existing };
      throw new TerminalToolError(
        ErrorCode.IDEMPOTENCY_KEY_REUSED,
        `This idempotency_key already created order ${orderId} with other arguments; use a new key for a new order.`,
      );
    }
    return { result: order, writes: [write] };
  },
  async reconcile({ record }, services) {
    // The order and the SUCCEEDED record commit together, so the order's existence is the whole answer.
    const order = await getOrder(
      services.doc,
      services.tableName,
      record.tenant,
      orderIdFor(record.tenant, record.tool, record.idempotencyKey),
    );
    return order ? { kind: 'found', result: order } : { kind: 'absent' };
  },
});
