import { createHash } from 'node:crypto';
import * as z from 'zod';
import { GetCommand, paginateScan, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { ExtraWrite } from 'idempotent-mcp/engine';

/** An order's item in the endpoint's table: a kind of its own, so it never meets the toolkit's `IDEM#` and `OUTBOX#` items. */
export const orderKey = (tenant: string, orderId: string) => ({ pk: `ORDER#${tenant}#${orderId}`, sk: 'ORDER' });

/** Identifiers a model passes around: the idempotency-key charset, so they are safe in storage keys too. */
export const identifier = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(/^[A-Za-z0-9._:-]+$/, 'may contain only A-Z a-z 0-9 . _ : -');

export const orderLineSchema = z.object({
  sku: identifier(64).describe('Stock keeping unit.'),
  quantity: z.number().int().min(1).max(10_000),
});

export const orderSchema = z.object({
  order_id: z.string(),
  status: z.enum(['created']),
  customer_id: z.string(),
  items: z.array(orderLineSchema),
  currency: z.string(),
  created_at: z.string().describe('ISO 8601.'),
});
export type Order = z.infer<typeof orderSchema>;

/**
 * Deterministic from tenant, tool and key: one key can only ever name one order, and a reconciler holding the
 * record can look the order up without any other state.
 */
export function orderIdFor(tenant: string, tool: string, idempotencyKey: string): string {
  return `ord_${createHash('sha256').update(`${tenant}\n${tool}\n${idempotencyKey}`).digest('hex').slice(0, 24)}`;
}

/** The order item, committed in the same transaction as the SUCCEEDED record; refused if the order exists. */
export function putOrderWrite(tenant: string, idempotencyKey: string, order: Order): ExtraWrite {
  return { create: { key: orderKey(tenant, order.order_id), item: { kind: 'order', tenant, idempotency_key: idempotencyKey, ...order } } };
}

function toOrder(item: Record<string, unknown>): Order {
  return orderSchema.parse({
    order_id: item.order_id,
    status: item.status,
    customer_id: item.customer_id,
    items: item.items,
    currency: item.currency,
    created_at: item.created_at,
  });
}

/** Tenant-scoped by construction: the tenant is part of the key, so another tenant's id finds nothing. */
export async function getOrder(doc: DynamoDBDocumentClient, tableName: string, tenant: string, orderId: string) {
  const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: orderKey(tenant, orderId), ConsistentRead: true }));
  return Item ? toOrder(Item) : undefined;
}

export interface OrderLedgerEntry extends Order {
  tenant: string;
  idempotency_key: string;
}

/** Every order of every tenant: for the local sandbox ledger only (a scan, never on a request path in AWS). */
export async function listAllOrders(doc: DynamoDBDocumentClient, tableName: string): Promise<OrderLedgerEntry[]> {
  const orders: OrderLedgerEntry[] = [];
  const pages = paginateScan(
    { client: doc },
    {
      TableName: tableName,
      FilterExpression: 'kind = :order',
      ExpressionAttributeValues: { ':order': 'order' },
      ConsistentRead: true,
    },
  );
  for await (const page of pages)
    for (const item of page.Items ?? [])
      orders.push({ tenant: item.tenant as string, idempotency_key: item.idempotency_key as string, ...toOrder(item) });
  return orders.sort((a, b) => a.created_at.localeCompare(b.created_at));
}
