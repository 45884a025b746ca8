import * as z from 'zod';
import { TerminalToolError } from 'idempotent-mcp/engine';
import { defineWriteTool } from 'idempotent-mcp/mcp';
import { identifier } from './orders';

export const reserveStockTool = defineWriteTool({
  name: 'reserve_stock',
  title: 'Reserve stock',
  description: 'Reserves units of a SKU for an order until it ships.',
  // Business arguments only: idempotency_key and trace_id are added for you.
  input: {
    order_id: identifier(128).describe('The order the units are for.'),
    sku: identifier(64),
    quantity: z.number().int().min(1).max(1000),
  },
  result: z.object({ reservation_id: z.string(), sku: z.string(), quantity: z.number() }),
  // MCP defaults both hints to true, so every tool states them: nothing destroyed, no outside system.
  annotations: { destructiveHint: false, openWorldHint: false },

  async execute(args, ctx) {
    // ctx: tenant (from the token), idempotencyKey, deadline, signal (aborts at the deadline), now, services.
    if (args.sku.startsWith('DISCONTINUED-')) {
      // A business rejection: stored as failed and replayed to every retry.
      throw new TerminalToolError('SKU_DISCONTINUED', `${args.sku} can no longer be reserved.`);
    }
    const reservation = { reservation_id: `res_${ctx.idempotencyKey}`, sku: args.sku, quantity: args.quantity };
    return {
      result: reservation,
      // Committed in the same DynamoDB transaction as the outcome: both or neither.
      writes: [
        {
          create: {
            key: { pk: `RESERVATION#${ctx.tenant}#${reservation.reservation_id}`, sk: 'RESERVATION' },
            item: { tenant: ctx.tenant, ...reservation },
          },
        },
      ],
    };
  },
});