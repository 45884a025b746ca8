import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { DynamoDBClient, CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
class HttpResponse { statusCode: number; headers: any; body: any; constructor(o: any) { this.statusCode = o.statusCode; this.headers = o.headers; this.body = o.body; } }
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { IdempotencyEngine } from './lambdas/engine/engine';
import { awsClientConfig } from './lambdas/store/clients';
import { DynamoDbIdempotencyStore } from './lambdas/store/dynamodb-idempotency-store';
import { ensureTable } from './lambdas/store/table-schema';
const endpoint = process.env.EP!;
/** Records the last real response, then replays it without I/O: measures client-side CPU only. */
function recordingHandler() {
  const real = new NodeHttpHandler();
  let canned: { statusCode: number; headers: Record<string, string>; body: Buffer } | undefined;
  let replaying = false;
  return {
    setReplay(on: boolean) { replaying = on; },
    handler: {
      metadata: { handlerProtocol: 'http/1.1' },
      async handle(req: any, opts: any) {
        if (replaying && canned) return { response: new HttpResponse({ statusCode: canned.statusCode, headers: { ...canned.headers }, body: Readable.from([canned.body]) }) };
        const { response } = await real.handle(req, opts);
        const chunks: Buffer[] = []; for await (const c of response.body) chunks.push(c);
        canned = { statusCode: response.statusCode, headers: response.headers, body: Buffer.concat(chunks) };
        return { response: new HttpResponse({ statusCode: canned.statusCode, headers: { ...canned.headers }, body: Readable.from([canned.body]) }) };
      },
      updateHttpClientConfig() {}, httpHandlerConfigs() { return {}; }, destroy() {},
    },
  };
}
const rec1 = recordingHandler(), rec2 = recordingHandler();
const c1 = new DynamoDBClient({ ...awsClientConfig(endpoint), maxAttempts: 3, requestHandler: rec1.handler as any });
const c2 = new DynamoDBClient({ ...awsClientConfig(endpoint), maxAttempts: 3, requestHandler: rec2.handler as any });
const doc1 = DynamoDBDocumentClient.from(c1, { marshallOptions: { removeUndefinedValues: true } });
const sfx = randomUUID().slice(0, 6);
const T = 'eng' + sfx;
await ensureTable(doc1, T);
await c2.send(new CreateTableCommand({ TableName: 'ptable' + sfx, BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }] }));
const engine = new IdempotencyEngine({ store: new DynamoDbIdempotencyStore(doc1, T) });
const args = { customer_id: 'cust-0042', items: [{ sku: 'SKU-1', quantity: 1 }, { sku: 'SKU-2', quantity: 1 }], currency: 'EUR' };
const cfg = new IdempotencyConfig({ eventKeyJmesPath: '[tenant, idempotency_key]', payloadValidationJmesPath: 'args', expiresAfterSeconds: 86400 });
cfg.registerLambdaContext({ getRemainingTimeInMillis: () => 30000 } as any);
const pt = makeIdempotent(async (e: any) => ({ order_id: randomUUID() }), { persistenceStore: new DynamoDBPersistenceLayer({ tableName: 'ptable' + sfx, awsSdkV3Client: c2 }), config: cfg });
const key = 'key-replay-000001';
const eng = () => engine.run({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, args, traceId: 'trace-123' }, {}, async () => ({ result: { order_id: randomUUID() } }));
const ptc = () => pt({ tenant: 'tenant-1', idempotency_key: key, args });
await eng(); await ptc();
const r1 = await eng(); const r2 = await ptc(); // these record the replay answers
console.log(JSON.stringify(r1).slice(0, 200), JSON.stringify(r2));
rec1.setReplay(true); rec2.setReplay(true);
const store = new DynamoDbIdempotencyStore(doc1, T);
const { recordToItem } = await import('./lambdas/store/dynamodb-idempotency-store');
const { PutCommand } = await import('@aws-sdk/lib-dynamodb');
const { fingerprint } = await import('./lambdas/core/fingerprint');
const now = Date.now();
const mkrec = () => ({ tenant: 'tenant-1', tool: 'create_order', idempotencyKey: key, fingerprint: fingerprint(args), status: 'PROCESSING' as const, ownerToken: randomUUID(), createdAt: now, updatedAt: now, leaseExpiresAt: now + 11000, retainUntil: now + 86400000, expiresAt: Math.floor(now / 1000) + 86400 });
const variants: [string, () => Promise<unknown>][] = [
  ['engine', eng],
  ['powertools', ptc],
  ['store.claim', () => store.claim(mkrec(), now, { onExpired: 'execute' })],
  ['raw doc put', () => doc1.send(new PutCommand({ TableName: T, Item: recordToItem(mkrec()), ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })).catch(() => {})],
];
const N = 6000;
for (const [, fn] of variants) for (let i = 0; i < 500; i++) await fn();
const acc = variants.map(() => 0);
for (let i = 0; i < N; i++) for (let v = 0; v < variants.length; v++) { const k = (v + i) % variants.length; const c0 = process.cpuUsage(); await variants[k]![1](); const c = process.cpuUsage(c0); acc[k]! += c.user + c.system; }
variants.forEach(([n], k) => console.log('C', n.padEnd(14), (acc[k]! / N).toFixed(0), 'us'));
