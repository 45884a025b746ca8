import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  ConditionalCheckFailedError,
  DocumentClient,
  DynamoDbServiceError,
  HttpTransport,
  type AwsCredentials,
  type DynamoDbOperation,
} from 'idempotent-mcp/dynamodb';
import { defaultEndpoint } from '../../lambdas/store/http-transport';
import { listenOnLoopback, startDynamoDbFaultProxy, type DynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { createTestTable } from '../support/dynamodb';
import { startSigV4VerifyingProxy, type SigV4VerifyingProxy } from '../support/sigv4-verifying-proxy';

/**
 * The lean transport every function ships instead of the AWS SDK: it must sign as AWS checks (DynamoDB Local does
 * not check, so a verifying proxy does), retry exactly what the SDK's standard mode retries, and keep a retried
 * transaction idempotent.
 */
const ROLE: AwsCredentials = { accessKeyId: 'ASIAFUNCTIONROLE', secretAccessKey: 'role-secret', sessionToken: 'session-token-of-the-role' };

let table: Awaited<ReturnType<typeof createTestTable>>;
let verifier: SigV4VerifyingProxy;
let faults: DynamoDbFaultProxy;
const opened: DocumentClient[] = [];

beforeAll(async () => {
  table = await createTestTable();
  verifier = await startSigV4VerifyingProxy(table.endpoint, [ROLE]);
  faults = await startDynamoDbFaultProxy(table.endpoint);
});
afterEach(() => faults.clear());
afterAll(async () => {
  for (const client of opened) client.destroy();
  await verifier?.stop();
  await faults?.stop();
  await table?.drop();
});

function client(endpoint: string, credentials: AwsCredentials = ROLE) {
  const attempts: DynamoDbOperation[] = [];
  const doc = new DocumentClient(new HttpTransport({ endpoint, region: 'us-east-1', credentials, onRequest: (operation) => attempts.push(operation) }));
  opened.push(doc);
  return { doc, attempts };
}

const item = (extra: Record<string, unknown> = {}) => ({ pk: `T#${randomUUID()}`, sk: 'ITEM', ...extra });

describe('signing (SigV4, checked by a proxy written from the specification)', () => {
  it('the verifier is right: it accepts the AWS SDK\'s own requests and refuses them signed with another secret', async () => {
    const sdk = (secretAccessKey: string) =>
      new DynamoDBClient({ endpoint: verifier.endpoint, region: 'us-east-1', credentials: { ...ROLE, secretAccessKey }, maxAttempts: 1 });
    const good = sdk(ROLE.secretAccessKey);
    const bad = sdk('not-the-secret');
    try {
      const key = { pk: { S: 'absent' }, sk: { S: 'ITEM' } };
      await expect(good.send(new GetItemCommand({ TableName: table.tableName, Key: key }))).resolves.toBeDefined();
      await expect(bad.send(new GetItemCommand({ TableName: table.tableName, Key: key }))).rejects.toMatchObject({ name: 'InvalidSignatureException' });
    } finally {
      good.destroy();
      bad.destroy();
    }
  });

  it('signs every operation the adapters send, the operation and session token headers included', async () => {
    const { doc } = client(verifier.endpoint);
    const before = verifier.checked().length;
    const written = item({ n: 1 });
    await doc.put({ TableName: table.tableName, Item: written, ConditionExpression: 'attribute_not_exists(pk)' });
    await doc.update({ TableName: table.tableName, Key: { pk: written.pk, sk: 'ITEM' }, UpdateExpression: 'SET n = :two', ExpressionAttributeValues: { ':two': 2 } });
    await doc.transactWrite({ TransactItems: [{ Put: { TableName: table.tableName, Item: item() } }, { Put: { TableName: table.tableName, Item: item() } }] });
    const page = await doc.query({ TableName: table.tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': written.pk } });
    expect(page.Items).toEqual([{ ...written, n: 2 }]);
    await doc.delete({ TableName: table.tableName, Key: { pk: written.pk, sk: 'ITEM' } });
    expect((await doc.get({ TableName: table.tableName, Key: { pk: written.pk, sk: 'ITEM' }, ConsistentRead: true })).Item).toBeUndefined();

    const checks = verifier.checked().slice(before);
    expect(checks).toHaveLength(6);
    for (const check of checks) {
      expect(check).toMatchObject({ valid: true });
      expect(check.signedHeaders).toEqual(expect.arrayContaining(['host', 'x-amz-date', 'x-amz-target', 'x-amz-security-token']));
    }
  });

  it('a refused signature is an answer, not retried: one request, and the error names it', async () => {
    const { doc, attempts } = client(verifier.endpoint, { ...ROLE, secretAccessKey: 'rotated-away' });
    const error = await doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DynamoDbServiceError);
    expect(error).toMatchObject({ code: 'InvalidSignatureException', statusCode: 400 });
    expect(attempts).toEqual(['GetItem']);
  });

  it("without credentials it says so and sends nothing (outside Lambda, pass a provider)", async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    delete process.env.AWS_ACCESS_KEY_ID;
    delete process.env.AWS_SECRET_ACCESS_KEY;
    try {
      const attempts: DynamoDbOperation[] = [];
      const doc = new DocumentClient(new HttpTransport({ endpoint: verifier.endpoint, region: 'us-east-1', onRequest: (op) => attempts.push(op) }));
      opened.push(doc);
      await expect(doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })).rejects.toThrow(/no AWS credentials: AWS_ACCESS_KEY_ID/);
      expect(attempts).toEqual([]);
    } finally {
      if (saved.id !== undefined) process.env.AWS_ACCESS_KEY_ID = saved.id;
      if (saved.secret !== undefined) process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
    }
  });

  it('asks a credentials provider once, and again only when its credentials near their expiry', async () => {
    let asked = 0;
    let expiresIn = 60 * 60_000;
    const provider = async (): Promise<AwsCredentials> => {
      asked++;
      return { ...ROLE, expiration: new Date(Date.now() + expiresIn) };
    };
    const doc = new DocumentClient(new HttpTransport({ endpoint: verifier.endpoint, region: 'us-east-1', credentials: provider }));
    opened.push(doc);
    for (let i = 0; i < 3; i++) await doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } });
    expect(asked).toBe(1);
    expiresIn = 60_000; // the next credentials are already within the refresh window
    const soon = new DocumentClient(new HttpTransport({ endpoint: verifier.endpoint, region: 'us-east-1', credentials: provider }));
    opened.push(soon);
    await soon.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } });
    await soon.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } });
    expect(asked).toBe(3);
    // Callers at once share one ask.
    asked = 0;
    const together = new DocumentClient(new HttpTransport({ endpoint: verifier.endpoint, region: 'us-east-1', credentials: provider }));
    opened.push(together);
    await Promise.all(Array.from({ length: 5 }, () => together.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })));
    expect(asked).toBe(1);
  });

  it("reads Lambda's environment credentials at each request, so a rotated session is used", async () => {
    const saved = { ...process.env };
    try {
      Object.assign(process.env, { AWS_ACCESS_KEY_ID: ROLE.accessKeyId, AWS_SECRET_ACCESS_KEY: 'stale', AWS_SESSION_TOKEN: 'stale' });
      const doc = new DocumentClient(new HttpTransport({ endpoint: verifier.endpoint, region: 'us-east-1', maxAttempts: 1 }));
      opened.push(doc);
      await expect(doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })).rejects.toMatchObject({ code: 'InvalidSignatureException' });
      Object.assign(process.env, { AWS_SECRET_ACCESS_KEY: ROLE.secretAccessKey, AWS_SESSION_TOKEN: ROLE.sessionToken });
      await expect(doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })).resolves.toEqual({ Item: undefined });
    } finally {
      process.env = saved;
    }
  });
});

describe('retries (the AWS SDK standard mode: what, how often)', () => {
  it("an answer that is not DynamoDB's (a proxy's HTML page) is retried only when its status says transient", async () => {
    const statuses = [502, 502, 502, 403];
    let answered = 0;
    const server = createServer((_req, res) => {
      res.writeHead(statuses[answered++] ?? 403, { 'content-type': 'text/html' });
      res.end('<html>gateway</html>');
    });
    const { endpoint, stop } = await listenOnLoopback(server);
    try {
      const { doc, attempts } = client(endpoint);
      await expect(doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })).rejects.toThrow(/HTTP 502 with a body that is not JSON/);
      expect(attempts).toHaveLength(3);
      answered = 3;
      attempts.length = 0;
      await expect(doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })).rejects.toThrow(/HTTP 403 with a body that is not JSON/);
      expect(attempts).toHaveLength(1);
    } finally {
      await stop();
    }
  });


  it('retries a 500 and a throttling answer, up to three attempts in all', async () => {
    const { doc, attempts } = client(faults.endpoint);
    const written = item();
    await doc.put({ TableName: table.tableName, Item: written });
    faults.inject({ operation: 'GetItem', fault: 'fail', times: 1 });
    faults.inject({ operation: 'GetItem', fault: 'throttle', times: 1 });
    attempts.length = 0;
    expect((await doc.get({ TableName: table.tableName, Key: written, ConsistentRead: true })).Item).toEqual(written);
    expect(attempts).toEqual(['GetItem', 'GetItem', 'GetItem']);

    faults.inject({ operation: 'GetItem', fault: 'fail', times: 3 });
    attempts.length = 0;
    await expect(doc.get({ TableName: table.tableName, Key: written })).rejects.toMatchObject({ code: 'InternalServerError', statusCode: 500 });
    expect(attempts).toHaveLength(3);
  });

  it('a request that gets no answer is abandoned after the socket timeout and retried, not left hanging', async () => {
    let received = 0;
    const server = createServer(() => {
      received++; // accepted, never answered
    });
    const { endpoint, stop } = await listenOnLoopback(server);
    try {
      const attempts: DynamoDbOperation[] = [];
      const doc = new DocumentClient(
        new HttpTransport({ endpoint, region: 'us-east-1', credentials: ROLE, socketTimeoutMs: 150, onRequest: (operation) => attempts.push(operation) }),
      );
      opened.push(doc);
      await expect(doc.get({ TableName: table.tableName, Key: { pk: 'x', sk: 'y' } })).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      expect(attempts).toHaveLength(3);
      expect(received).toBe(3);
    } finally {
      await stop();
    }
  });

  it('refuses settings it cannot honour, saying which', () => {
    expect(() => new HttpTransport({ maxAttempts: 0, credentials: ROLE })).toThrow(/maxAttempts must be a whole number of at least 1/);
    expect(() => new HttpTransport({ maxAttempts: Number.NaN, credentials: ROLE })).toThrow(/maxAttempts/);
    expect(() => new HttpTransport({ endpoint: 'http://127.0.0.1:8000/?x=1', credentials: ROLE })).toThrow(/must not carry a query/);
    expect(() => new HttpTransport({ endpoint: 'ftp://127.0.0.1', credentials: ROLE })).toThrow(/must be http\(s\)/);
  });

  it('never retries a refused condition: one request, and the refusing item comes back', async () => {
    const { doc, attempts } = client(faults.endpoint);
    const written = item({ owner: 'first' });
    await doc.put({ TableName: table.tableName, Item: written });
    attempts.length = 0;
    const error = await doc
      .put({ TableName: table.tableName, Item: { ...written, owner: 'second' }, ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConditionalCheckFailedError);
    expect((error as ConditionalCheckFailedError).Item).toEqual(written);
    expect(attempts).toEqual(['PutItem']);
  });

  it('a transaction whose answer was lost is retried with the same ClientRequestToken, and is answered as committed', async () => {
    const { doc, attempts } = client(faults.endpoint);
    const first = item({ n: 1 });
    const second = item({ n: 2 });
    faults.inject({ operation: 'TransactWriteItems', fault: 'drop-response', times: 1 });
    await doc.transactWrite({
      TransactItems: [
        { Put: { TableName: table.tableName, Item: first, ConditionExpression: 'attribute_not_exists(pk)' } },
        { Put: { TableName: table.tableName, Item: second, ConditionExpression: 'attribute_not_exists(pk)' } },
      ],
    });
    expect(attempts).toEqual(['TransactWriteItems', 'TransactWriteItems']);
    const tokens = faults
      .received()
      .filter((request) => request.operation === 'TransactWriteItems')
      .map((request) => (JSON.parse(request.body) as { ClientRequestToken?: string }).ClientRequestToken);
    expect(tokens).toHaveLength(2);
    expect(tokens[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(tokens[1]).toBe(tokens[0]);
    for (const written of [first, second]) expect((await doc.get({ TableName: table.tableName, Key: { pk: written.pk, sk: 'ITEM' }, ConsistentRead: true })).Item).toEqual(written);
  });
});

describe('values', () => {
  it('binary attributes and sets round-trip as bytes', async () => {
    const { doc } = client(table.endpoint, { accessKeyId: 'local', secretAccessKey: 'local' });
    const written = item({ blob: new Uint8Array([0, 1, 2, 250, 255]), blobs: new Set([new Uint8Array([1]), new Uint8Array([2, 3])]), tags: new Set(['a', 'b']) });
    await doc.put({ TableName: table.tableName, Item: written });
    const { Item } = await doc.get({ TableName: table.tableName, Key: { pk: written.pk, sk: 'ITEM' }, ConsistentRead: true });
    expect(Buffer.from(Item!.blob as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 250, 255]));
    expect([...(Item!.blobs as Set<Uint8Array>)].map((bytes) => [...bytes]).sort()).toEqual([[1], [2, 3]]);
    expect(Item!.tags).toEqual(new Set(['a', 'b']));
  });

  it('a Buffer is written as bytes too, and an item read back can be written again as it came', async () => {
    const { doc } = client(table.endpoint, { accessKeyId: 'local', secretAccessKey: 'local' });
    const written = item({ blob: Buffer.from('hi'), blobs: new Set([Buffer.from('a'), Buffer.from('bc')]) });
    await doc.put({ TableName: table.tableName, Item: written });
    const key = { pk: written.pk, sk: 'ITEM' };
    const read = (await doc.get({ TableName: table.tableName, Key: key, ConsistentRead: true })).Item!;
    expect(Buffer.from(read.blob as Uint8Array).toString()).toBe('hi');
    await doc.put({ TableName: table.tableName, Item: { ...read, n: 2 } });
    const again = (await doc.get({ TableName: table.tableName, Key: key, ConsistentRead: true })).Item!;
    expect(Buffer.from(again.blob as Uint8Array).toString()).toBe('hi');
    expect([...(again.blobs as Set<Uint8Array>)].map((bytes) => Buffer.from(bytes).toString()).sort()).toEqual(['a', 'bc']);
  });

  it('pages a query to the end', async () => {
    const { doc } = client(table.endpoint, { accessKeyId: 'local', secretAccessKey: 'local' });
    const pk = `PAGES#${randomUUID()}`;
    for (let i = 0; i < 5; i++) await doc.put({ TableName: table.tableName, Item: { pk, sk: `S#${i}` } });
    const pages = [];
    for await (const page of doc.queryPages({ TableName: table.tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, Limit: 2 })) pages.push(page.Items.map((i) => i.sk));
    expect(pages.flat()).toEqual(['S#0', 'S#1', 'S#2', 'S#3', 'S#4']);
    expect(pages.length).toBeGreaterThanOrEqual(3);
  });
});

describe('the endpoint', () => {
  it("is the region's, in the China partition too, unless the environment names one", () => {
    const saved = { one: process.env.AWS_ENDPOINT_URL_DYNAMODB, all: process.env.AWS_ENDPOINT_URL };
    delete process.env.AWS_ENDPOINT_URL_DYNAMODB;
    delete process.env.AWS_ENDPOINT_URL;
    try {
      expect(defaultEndpoint('eu-west-1')).toBe('https://dynamodb.eu-west-1.amazonaws.com');
      expect(defaultEndpoint('cn-north-1')).toBe('https://dynamodb.cn-north-1.amazonaws.com.cn');
      process.env.AWS_ENDPOINT_URL = 'https://all.example';
      expect(defaultEndpoint('eu-west-1')).toBe('https://all.example');
      process.env.AWS_ENDPOINT_URL_DYNAMODB = 'https://vpce.example';
      expect(defaultEndpoint('eu-west-1')).toBe('https://vpce.example');
    } finally {
      if (saved.one === undefined) delete process.env.AWS_ENDPOINT_URL_DYNAMODB;
      else process.env.AWS_ENDPOINT_URL_DYNAMODB = saved.one;
      if (saved.all === undefined) delete process.env.AWS_ENDPOINT_URL;
      else process.env.AWS_ENDPOINT_URL = saved.all;
    }
  });
});
