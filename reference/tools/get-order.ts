import { ErrorCode } from 'idempotent-mcp/engine';
import { defineReadTool, ReadToolError, type ReadToolContext } from 'idempotent-mcp/mcp';
import { getOrder, identifier, orderSchema } from './orders';
import type { OrderServices } from './services';

export const getOrderTool = defineReadTool({
  name: 'get_order',
  title: 'Get order',
  description: 'Returns one of your orders by its order_id.',
  input: { order_id: identifier(128).describe('The order_id that create_order returned.') },
  result: orderSchema,
  annotations: { openWorldHint: false },
  async execute({ order_id }, { services, caller }: ReadToolContext<OrderServices>) {
    const order = await getOrder(services.doc, services.tableName, caller.tenant, order_id);
    if (!order) throw new ReadToolError(ErrorCode.NOT_FOUND, `No order ${order_id} exists for your account.`);
    return order;
  },
});
