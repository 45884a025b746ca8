import { ErrorCode } from '../../core/errors';
import { getOrder, identifier, orderSchema } from '../../orders/orders';
import { defineReadTool, ReadToolError } from '../define-read-tool';

export const getOrderTool = defineReadTool({
  name: 'get_order',
  title: 'Get order',
  description: 'Returns one of your orders by its order_id.',
  input: { order_id: identifier(128).describe('The order_id that create_order returned.') },
  result: orderSchema,
  annotations: { openWorldHint: false },
  async execute({ order_id }, { services, caller }) {
    const order = await getOrder(services.doc, services.tableName, caller.tenant, order_id);
    if (!order) throw new ReadToolError(ErrorCode.NOT_FOUND, `No order ${order_id} exists for your account.`);
    return order;
  },
});
