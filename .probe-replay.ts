import { randomUUID } from 'node:crypto';
import { DynamoDBClient, CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { IdempotencyEngine } from './lambdas/engine/engine';
import { awsClientConfig } from './lambdas/store/clients';
import { DynamoDbIdempotencyStore, recordToItem } from './lambdas/store/dynamodb-idempotency-store';
import { ensureTable } from './lambdas/store/table-schema';
import { startDynamoDbLocal } from './local/dynamodb-local';

const d = await startDynamoDbLocal();
process.on('uncaughtException', async (e) => { console.error(e); await d.stop(); process.exit(1); });
process.on('unhandledRejection', async (e) => { console.error(e); await d.stop(); process.exit(1); });
const mk = () => new DynamoDBClient({ ...awsClientConfig(d.endpoint), maxAttempts: 3 });
const c1 = mk(), c2 = mk(), c3 = mk(), c4 = mk();
const doc1 = DynamoDBDocumentClient.from(c1, { marshallOptions: { removeUndefinedValues: true } });
const doc3 = DynamoDBDocumentClient.from(c3, { marshallOptions: { removeUndefinedValues: true } });
const doc4 = DynamoDBDocumentClient.from(c4, { marshallOptions: { removeUndefinedValues: true } });
await ensureTable(doc1, 'eng');
await ensureTable(doc1, 'plain');
await c1.send(new CreateTableCommand({ TableName: 'ptable', BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }] }));
await c1.send(new CreateTableCommand({ TableName: 'nogsi', BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' },{ AttributeName: 'sk', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' },{ AttributeName: 'sk', KeyType: 'RANGE' }] }));
const engine = new IdempotencyEngine({ store: new DynamoDbIdempotencyStore(doc1, 'eng') });
const args = { customer_id: 'cust-0042', items: [{ sku: 'SKU-1', quantity: 1 }, { sku: 'SKU-2', quantity: 1 }], currency: 'EUR' };
const ctx = { getRemainingTimeInMillis: () => 30000 } as any;
const cfg = new IdempotencyConfig({ eventKeyJmesPath: '[tenant, idempotency_key]', payloadValidationJmesPath: 'args', expiresAfterSeconds: 86400 });
cfg.registerLambdaContext(ctx);
const pt = makeIdempotent(async (e: any) => ({ order_id: randomUUID() }), { persistenceStore: new DynamoDBPersistenceLayer({ tableName: 'ptable', awsSdkV3Client: c2 }), config: cfg });
const key = 'key-replay-000001';
await engine.run({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, args }, {}, async () => ({ result: { order_id: randomUUID() } }));
await pt({ tenant: 'tenant-1', idempotency_key: key, args });
// a raw Put on a record shaped like ours, with the same condition, through doc client
const now = Date.now();
const rec = { tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, fingerprint: 'f'.repeat(64), status: 'SUCCEEDED' as const, ownerToken: randomUUID(), createdAt: now, updatedAt: now, leaseExpiresAt: now + 11000, retainUntil: now + 86400000, expiresAt: Math.floor(now / 1000) + 86400, result: { order_id: randomUUID() } };
for (const t of ['plain', 'nogsi']) await doc3.send(new PutCommand({ TableName: t, Item: recordToItem(rec) }));
const condPut = (table: string, doc: DynamoDBDocumentClient) => doc.send(new PutCommand({ TableName: table, Item: recordToItem({ ...rec, status: 'PROCESSING', ownerToken: randomUUID() }), ConditionExpression: 'attribute_not_exists(pk) OR (#status IN (:s, :f) AND (#e <= :n OR retain_until <= :now))', ExpressionAttributeNames: { '#status': 'status', '#e': 'expires_at' }, ExpressionAttributeValues: { ':s': 'SUCCEEDED', ':f': 'FAILED', ':n': 1, ':now': 1 }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })).catch(() => {});
const simpleCondPut = (table: string, doc: DynamoDBDocumentClient) => doc.send(new PutCommand({ TableName: table, Item: { pk: recordToItem(rec).pk, sk: 'IDEM', x: 1 }, ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })).catch(() => {});
const variants: [string, () => Promise<unknown>][] = [
  ['engine replay', () => engine.run({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, args }, {}, async () => ({ result: 1 })) ],
  ['powertools replay', () => pt({ tenant: 'tenant-1', idempotency_key: key, args })],
  ['raw condPut table w/ GSI', () => condPut('plain', doc3)],
  ['raw condPut table no GSI', () => condPut('nogsi', doc4)],
  ['simple condPut no GSI', () => simpleCondPut('nogsi', doc4)],
];
for (let round = 0; round < 3; round++) {
  for (const [name, fn] of variants) {
    for (let i = 0; i < 100; i++) await fn();
    const cpu0 = process.cpuUsage(); const t0 = performance.now(); const lat: number[] = [];
    for (let i = 0; i < 300; i++) { const t = performance.now(); await fn(); lat.push(performance.now() - t); }
    const wall = performance.now() - t0; const cpu = process.cpuUsage(cpu0);
    lat.sort((a, b) => a - b);
    console.log(round, name.padEnd(28), 'p50', lat[150]!.toFixed(2), 'node cpu us/call', ((cpu.user + cpu.system) / 300).toFixed(0), 'wall/call', (wall / 300).toFixed(2));
  }
}
await d.stop();
