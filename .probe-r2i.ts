import { createHash, randomUUID } from 'node:crypto';
import { recordToItem } from './lambdas/store/dynamodb-idempotency-store';
import { attentionPk, Keys } from './lambdas/store/table-schema';
import { fingerprint } from './lambdas/core/fingerprint';
const now = Date.now();
const r = { tenant: 'tenant-1', tool: 'create_order', idempotencyKey: 'key-replay-000001', fingerprint: 'f'.repeat(64), status: 'PROCESSING' as const, ownerToken: randomUUID(), createdAt: now, updatedAt: now, leaseExpiresAt: now + 11000, retainUntil: now + 86400000, expiresAt: Math.floor(now / 1000) + 86400 };
const args = { customer_id: 'cust-0042', items: [{ sku: 'SKU-1', quantity: 1 }, { sku: 'SKU-2', quantity: 1 }], currency: 'EUR', trace_id: 'x' };
const ops: [string, () => unknown][] = [
  ['recordToItem fixed', () => recordToItem(r)],
  ['attentionPk', () => attentionPk('LEASE', 'IDEM#tenant-1#create_order#key-replay-000001')],
  ['sha1 raw', () => createHash('sha1').update('IDEM#tenant-1#create_order#key').digest()],
  ['Keys.idempotency', () => Keys.idempotency('a', 'b', 'c')],
  ['fingerprint', () => fingerprint(args)],
  ['randomUUID', () => randomUUID()],
];
for (let round = 0; round < 2; round++) for (const [name, fn] of ops) {
  for (let i = 0; i < 20000; i++) fn();
  const t = process.hrtime.bigint(); for (let i = 0; i < 100000; i++) fn(); const d = Number(process.hrtime.bigint() - t) / 1000;
  console.log(round, name.padEnd(22), (d / 100000).toFixed(2), 'us');
}
