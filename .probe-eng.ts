import { randomUUID } from 'node:crypto';
import { fingerprint } from './lambdas/core/fingerprint';
import { validateIdempotencyKey, validateTenantId, validateToolName, hashForLog } from './lambdas/core/idempotency-key';
import { recordToItem, itemToRecord } from './lambdas/store/dynamodb-idempotency-store';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { decideForExisting } from './lambdas/core/state-machine';
import { WriteResults } from './lambdas/core/result-contract';
const args = { customer_id: 'cust-0042', items: [{ sku: 'SKU-1', quantity: 1 }, { sku: 'SKU-2', quantity: 1 }], currency: 'EUR', trace_id: 'x' };
const now = Date.now();
const rec = () => ({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: 'key-replay-000001', fingerprint: fingerprint(args), status: 'PROCESSING' as const, ownerToken: randomUUID(), createdAt: now, updatedAt: now, leaseExpiresAt: now + 11000, retainUntil: now + 86400000, expiresAt: Math.floor(now / 1000) + 86400 });
const old = marshall({ ...recordToItem({ ...rec(), status: 'SUCCEEDED' as any }), result: { order_id: randomUUID() } }, { removeUndefinedValues: true });
const ops: [string, () => unknown][] = [
  ['validate', () => { validateToolName('create_order'); validateTenantId('tenant-1'); validateIdempotencyKey('key-replay-000001'); }],
  ['fingerprint', () => fingerprint(args)],
  ['randomUUID', () => randomUUID()],
  ['recordToItem', () => recordToItem(rec())],
  ['unmarshall+itemToRecord', () => itemToRecord(unmarshall(old))],
  ['decide', () => decideForExisting(itemToRecord(unmarshall(old)), { fingerprint: 'x', now, policy: { onExpired: 'execute', reexecuteSafe: false } })],
  ['hashForLog', () => hashForLog('key-replay-000001')],
  ['result', () => WriteResults.succeeded('k', { a: 1 }, { firstExecutedAt: now })],
];
for (const [name, fn] of ops) {
  for (let i = 0; i < 20000; i++) fn();
  const t = process.cpuUsage(); for (let i = 0; i < 50000; i++) fn(); const c = process.cpuUsage(t);
  console.log(name.padEnd(26), ((c.user + c.system) / 50000).toFixed(2), 'us');
}
