import { randomUUID } from 'node:crypto';
import { attentionPk, Keys, TableSchema } from './lambdas/store/table-schema';
const now = Date.now();
const r: any = { tenant: 'tenant-1', tool: 'create_order', idempotencyKey: 'key-replay-000001', fingerprint: 'f'.repeat(64), status: 'PROCESSING' as const, ownerToken: randomUUID(), createdAt: now, updatedAt: now, leaseExpiresAt: now + 11000, retainUntil: now + 86400000, expiresAt: Math.floor(now / 1000) + 86400 };
function a(record: any) {
  const key = Keys.idempotency(record.tenant, record.tool, record.idempotencyKey);
  return { ...key, tenant: record.tenant, tool: record.tool, idempotency_key: record.idempotencyKey, fingerprint: record.fingerprint, status: record.status, owner_token: record.ownerToken, created_at: record.createdAt, updated_at: record.updatedAt, lease_expires_at: record.leaseExpiresAt, retain_until: record.retainUntil, expires_at: record.expiresAt, trace_id: record.traceId, result: record.result, error: record.error, error_type: record.errorType, reconcile_attempts: record.reconcileAttempts, next_check_at: record.nextCheckAt };
}
function b(record: any) { const item: any = a(record); item.attention_pk = attentionPk('LEASE', item.pk); item.attention_at = record.leaseExpiresAt; return item; }
function c(record: any) { const item: any = a(record); item[TableSchema.attentionIndex.partitionKey] = 'LEASE#1'; item[TableSchema.attentionIndex.sortKey] = record.leaseExpiresAt; return item; }
const ops: [string, () => unknown][] = [['a literal', () => a(r)], ['b +attention', () => b(r)], ['c computed', () => c(r)], ['attentionPk', () => attentionPk('LEASE', 'IDEM#x')]];
for (let round = 0; round < 2; round++) for (const [name, fn] of ops) {
  for (let i = 0; i < 20000; i++) fn();
  const t = process.hrtime.bigint(); for (let i = 0; i < 100000; i++) fn(); const d = Number(process.hrtime.bigint() - t) / 1000;
  console.log(round, name.padEnd(22), (d / 100000).toFixed(2), 'us');
}
function d(record: any) {
  const key = Keys.idempotency(record.tenant, record.tool, record.idempotencyKey);
  return { pk: key.pk, sk: key.sk, tenant: record.tenant, tool: record.tool, idempotency_key: record.idempotencyKey, fingerprint: record.fingerprint, status: record.status, owner_token: record.ownerToken, created_at: record.createdAt, updated_at: record.updatedAt, lease_expires_at: record.leaseExpiresAt, retain_until: record.retainUntil, expires_at: record.expiresAt, trace_id: record.traceId, result: record.result, error: record.error, error_type: record.errorType, reconcile_attempts: record.reconcileAttempts, next_check_at: record.nextCheckAt };
}
function e(record: any) { return { x: record.tenant }; }
for (let round = 0; round < 2; round++) for (const [name, fn] of [['d no spread', () => d(r)], ['e tiny', () => e(r)], ['keys only', () => Keys.idempotency(r.tenant, r.tool, r.idempotencyKey)]] as [string, () => unknown][]) {
  for (let i = 0; i < 20000; i++) fn();
  const t = process.hrtime.bigint(); for (let i = 0; i < 100000; i++) fn(); const dd = Number(process.hrtime.bigint() - t) / 1000;
  console.log(round, name.padEnd(22), (dd / 100000).toFixed(2), 'us');
}
