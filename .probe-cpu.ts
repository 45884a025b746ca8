import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { DynamoDBClient, CreateTableCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { IdempotencyEngine } from './lambdas/engine/engine';
import { awsClientConfig } from './lambdas/store/clients';
import { DynamoDbIdempotencyStore, recordToItem } from './lambdas/store/dynamodb-idempotency-store';
import { ensureTable } from './lambdas/store/table-schema';
const endpoint = process.env.EP!;
const javaPid = process.env.JPID!;
const javaCpu = () => { const f = readFileSync(`/proc/${javaPid}/stat`, 'utf8').split(') ')[1]!.split(' '); return (Number(f[11]) + Number(f[12])) * 10000; }; // us (100Hz ticks)
const c1 = new DynamoDBClient({ ...awsClientConfig(endpoint), maxAttempts: 3 });
const doc1 = DynamoDBDocumentClient.from(c1, { marshallOptions: { removeUndefinedValues: true } });
const sfx = randomUUID().slice(0, 6);
const T = 'eng' + sfx;
await ensureTable(doc1, T);
await c1.send(new CreateTableCommand({ TableName: 'ptable' + sfx, BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }] }));
const engine = new IdempotencyEngine({ store: new DynamoDbIdempotencyStore(doc1, T) });
const args = { customer_id: 'cust-0042', items: [{ sku: 'SKU-1', quantity: 1 }, { sku: 'SKU-2', quantity: 1 }], currency: 'EUR' };
const cfg = new IdempotencyConfig({ eventKeyJmesPath: '[tenant, idempotency_key]', payloadValidationJmesPath: 'args', expiresAfterSeconds: 86400 });
cfg.registerLambdaContext({ getRemainingTimeInMillis: () => 30000 } as any);
const pt = makeIdempotent(async (e: any) => ({ order_id: randomUUID() }), { persistenceStore: new DynamoDBPersistenceLayer({ tableName: 'ptable' + sfx, awsSdkV3Client: c1 }), config: cfg });
const key = 'key-replay-000001';
await engine.run({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, args }, {}, async () => ({ result: { order_id: randomUUID() } }));
await pt({ tenant: 'tenant-1', idempotency_key: key, args });
const now = Date.now();
const rec = { tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, fingerprint: 'f'.repeat(64), status: 'PROCESSING' as const, ownerToken: randomUUID(), createdAt: now, updatedAt: now, leaseExpiresAt: now + 11000, retainUntil: now + 86400000, expiresAt: Math.floor(now / 1000) + 86400, traceId: undefined };
const cond = { ConditionExpression: 'attribute_not_exists(pk) OR (#status IN (:s, :f) AND (#e <= :n OR retain_until <= :now))', ExpressionAttributeNames: { '#status': 'status', '#e': 'expires_at' }, ExpressionAttributeValues: { ':s': 'SUCCEEDED', ':f': 'FAILED', ':n': 1, ':now': 1 }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const };
const full = () => recordToItem({ ...rec, ownerToken: randomUUID() });
const slim = () => { const i = full(); return { pk: i.pk, sk: i.sk, status: i.status, fingerprint: i.fingerprint, owner_token: i.owner_token, created_at: i.created_at, lease_expires_at: i.lease_expires_at, retain_until: i.retain_until, expires_at: i.expires_at }; };
await c1.send(new CreateTableCommand({ TableName: 'nogsi' + sfx, BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' },{ AttributeName: 'sk', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' },{ AttributeName: 'sk', KeyType: 'RANGE' }] }));
const stored = recordToItem({ ...rec, status: 'SUCCEEDED' as any, result: { order_id: randomUUID() } } as any);
await doc1.send(new PutCommand({ TableName: 'nogsi' + sfx, Item: stored }));
await doc1.send(new PutCommand({ TableName: T, Item: { ...stored, pk: 'slimrec' } }));
await doc1.send(new PutCommand({ TableName: T, Item: { pk: 'tinyrec', sk: 'IDEM', status: 'SUCCEEDED', fingerprint: 'f'.repeat(64), result: { order_id: randomUUID() }, expires_at: 1 } }));
const simple = { ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const };
const C = (ConditionExpression: string, names: Record<string, string>, values: Record<string, unknown>) => ({ ConditionExpression, ...(Object.keys(names).length ? { ExpressionAttributeNames: names } : {}), ...(Object.keys(values).length ? { ExpressionAttributeValues: values } : {}), ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const });
const conds: [string, ReturnType<typeof C>][] = [
  ['current', C('attribute_not_exists(pk) OR (#status IN (:s, :f) AND (#e <= :n OR retain_until <= :now))', { '#e': 'expires_at', '#status': 'status' }, { ':n': 1, ':now': 1, ':s': 'SUCCEEDED', ':f': 'FAILED' })],
  ['single', C('attribute_not_exists(pk) OR (#status IN (:s, :f) AND retain_until <= :now)', { '#status': 'status' }, { ':now': 1, ':s': 'SUCCEEDED', ':f': 'FAILED' })],
];
const slim3 = () => { const i = full(); delete i.tenant; delete i.tool; delete i.idempotency_key; return i; };
const single = conds[1]![1];
await doc1.send(new PutCommand({ TableName: T, Item: (() => { const i = { ...stored, pk: 'slimrec3' }; delete i.tenant; delete i.tool; delete i.idempotency_key; delete i.error; delete i.error_type; return i; })() }));
const variants: [string, () => Promise<unknown>][] = [
  ['engine replay', () => engine.run({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, args }, {}, async () => ({ result: 1 }))],
  ['powertools replay', () => pt({ tenant: 'tenant-1', idempotency_key: key, args })],
  ['engine conflict', () => engine.run({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, args: { ...args, currency: 'USD' } }, {}, async () => ({ result: 1 }))],
  ['powertools conflict', () => pt({ tenant: 'tenant-1', idempotency_key: key, args: { ...args, currency: 'USD' } }).catch(() => {})],
  ['raw full single', () => doc1.send(new PutCommand({ TableName: T, Item: full(), ...single })).catch((e) => { if (e.name !== 'ConditionalCheckFailedException') throw e; })],
  ['raw slim3 single', () => doc1.send(new PutCommand({ TableName: T, Item: { ...slim3(), pk: 'slimrec3' }, ...single })).catch((e) => { if (e.name !== 'ConditionalCheckFailedException') throw e; })],
];
const N = Number(process.env.N ?? 2000);
for (const [, fn] of variants) for (let i = 0; i < 200; i++) await fn();
const acc = variants.map(() => ({ node: 0, java: 0, lat: [] as number[] }));
for (let i = 0; i < N; i++) {
  for (let v = 0; v < variants.length; v++) {
    const idx = (v + i) % variants.length;
    const c0 = process.cpuUsage(); const j0 = javaCpu(); const t = performance.now();
    await variants[idx]![1]();
    const lat = performance.now() - t; const c = process.cpuUsage(c0); const j = javaCpu() - j0;
    acc[idx]!.node += c.user + c.system; acc[idx]!.java += j; acc[idx]!.lat.push(lat);
  }
}
variants.forEach(([name], k) => { const a = acc[k]!; a.lat.sort((x, y) => x - y); console.log('R', name.padEnd(24), 'p50', a.lat[N / 2]!.toFixed(2), 'node us', (a.node / N).toFixed(0), 'java us', (a.java / N).toFixed(0)); });
c1.destroy();
