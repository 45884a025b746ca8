import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeDynamoDbClient, createDynamoDbClient, DynamoDbClientDefaults } from '../../lambdas/store/clients';
import { cancellationReasons, isConditionRefusal, refusingItem } from '../../lambdas/store/refusals';
import { createTestTable } from '../support/dynamodb';
import { startDynamoDbFaultProxy, type DynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { startSigV4VerifyingProxy } from '../support/sigv4-verifying-proxy';

/**
 * What the hand-written client used to promise, now the AWS SDK's behaviour through createDynamoDbClient: tested
 * here so that a change of settings (or of the SDK) that loses one of them fails.
 */
let table: Awaited<ReturnType<typeof createTestTable>>;
let proxy: DynamoDbFaultProxy;
let doc: ReturnType<typeof createDynamoDbClient>;
beforeAll(async () => {
  table = await createTestTable();
  proxy = await startDynamoDbFaultProxy(table.endpoint);
  doc = createDynamoDbClient({ endpoint: proxy.endpoint });
});
afterEach(() => proxy.clear());
afterAll(async () => {
  closeDynamoDbClient(doc);
  await proxy.stop();
  await table.drop();
});

const key = () => ({ pk: `CLIENT#${randomUUID()}`, sk: 'ITEM' });
const operations = () => proxy.received().map((r) => r.operation);

describe('answers', () => {
  it('a refused condition is an answer, never retried: one request, and the refusing item comes with it', async () => {
    const item = { ...key(), owner: 'first' };
    await doc.send(new PutCommand({ TableName: table.tableName, Item: item }));
    proxy.clear();
    const refused = await doc
      .send(
        new PutCommand({
          TableName: table.tableName,
          Item: { ...item, owner: 'second' },
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      )
      .catch((err: unknown) => err);
    expect(isConditionRefusal(refused)).toBe(true);
    expect(refusingItem(refused)).toEqual(item);
    expect(operations()).toEqual(['PutItem']);
  });

  it("a logger given in clientConfig still gets the SDK's log of a refused write (the client made without one skips it)", async () => {
    const errors: unknown[] = [];
    const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: (entry: unknown) => errors.push(entry) };
    const logged = createDynamoDbClient({ endpoint: proxy.endpoint, clientConfig: { logger } });
    try {
      const item = { ...key(), owner: 'first' };
      await logged.send(new PutCommand({ TableName: table.tableName, Item: item }));
      await logged
        .send(new PutCommand({ TableName: table.tableName, Item: item, ConditionExpression: 'attribute_not_exists(pk)' }))
        .catch(() => {});
    } finally {
      closeDynamoDbClient(logged);
    }
    expect(errors).toEqual([
      expect.objectContaining({
        commandName: 'PutItemCommand',
        error: expect.objectContaining({ name: 'ConditionalCheckFailedException' }),
      }),
    ]);
  });

  it("a cancelled transaction's reasons carry the refusing items, in order", async () => {
    const held = { ...key(), owner: 'holder' };
    await doc.send(new PutCommand({ TableName: table.tableName, Item: held }));
    const cancelled = await doc
      .send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: table.tableName, Item: key() } },
            {
              Put: {
                TableName: table.tableName,
                Item: { ...held, owner: 'other' },
                ConditionExpression: 'attribute_not_exists(pk)',
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      )
      .catch((err: unknown) => err);
    expect(cancellationReasons(cancelled)).toEqual([
      { Code: 'None', Message: undefined, Item: undefined },
      expect.objectContaining({ Code: 'ConditionalCheckFailed', Item: held }),
    ]);
  });

  it('a transaction whose answer was lost is retried with the same ClientRequestToken, and is answered as committed', async () => {
    const item = { ...key(), owner: 'once' };
    proxy.inject({ operation: 'TransactWriteItems', fault: 'drop-response', times: 1 });
    await doc.send(
      new TransactWriteCommand({
        TransactItems: [{ Put: { TableName: table.tableName, Item: item, ConditionExpression: 'attribute_not_exists(pk)' } }],
      }),
    );
    const sent = proxy.received().filter((r) => r.operation === 'TransactWriteItems');
    expect(sent).toHaveLength(2);
    const tokens = sent.map((r) => (JSON.parse(r.body) as { ClientRequestToken?: string }).ClientRequestToken);
    expect(tokens[0]).toMatch(/.+/);
    expect(tokens[1]).toBe(tokens[0]);
    expect((await doc.send(new GetCommand({ TableName: table.tableName, Key: { pk: item.pk, sk: item.sk } }))).Item).toEqual(item);
  });

  it(`retries a 500 and a throttling answer, up to ${DynamoDbClientDefaults.maxAttempts} attempts in all`, async () => {
    const k = key();
    proxy.inject({ operation: 'GetItem', fault: 'fail', times: 1 });
    proxy.inject({ operation: 'GetItem', fault: 'throttle', times: 1 });
    await doc.send(new GetCommand({ TableName: table.tableName, Key: k }));
    expect(operations()).toEqual(['GetItem', 'GetItem', 'GetItem']);
    proxy.clear();
    proxy.inject({ operation: 'GetItem', fault: 'fail', times: 10 });
    await expect(doc.send(new GetCommand({ TableName: table.tableName, Key: k }))).rejects.toMatchObject({ $metadata: { attempts: 3 } });
  });
});

describe('values', () => {
  it('binary attributes and sets round-trip as bytes', async () => {
    const item = { ...key(), blob: new Uint8Array([0, 1, 2, 255]), blobs: new Set([new Uint8Array([1]), new Uint8Array([2, 3])]) };
    await doc.send(new PutCommand({ TableName: table.tableName, Item: item }));
    const { Item } = await doc.send(new GetCommand({ TableName: table.tableName, Key: { pk: item.pk, sk: item.sk } }));
    expect(Buffer.from(Item!.blob as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect([...(Item!.blobs as Set<Uint8Array>)].map((b) => Buffer.from(b).toString('hex')).sort()).toEqual(['01', '0203']);
  });

  it('leaves undefined attributes out (optional record fields) instead of refusing the write', async () => {
    const item = { ...key(), present: 1, absent: undefined };
    await doc.send(new PutCommand({ TableName: table.tableName, Item: item }));
    const { Item } = await doc.send(new GetCommand({ TableName: table.tableName, Key: { pk: item.pk, sk: item.sk } }));
    expect(Item).toEqual({ pk: item.pk, sk: item.sk, present: 1 });
  });
});

describe('credentials', () => {
  it('asks the provider again as its credentials near their expiry, and signs with the rotated ones', async () => {
    const secrets = [
      { accessKeyId: 'AKIDFIRST', secretAccessKey: 'first-secret' },
      { accessKeyId: 'AKIDSECOND', secretAccessKey: 'second-secret' },
    ];
    const verifier = await startSigV4VerifyingProxy(table.endpoint, secrets);
    let asked = 0;
    // A role session: the first credentials enter the SDK's refresh window (five minutes before expiry) a second
    // after they are handed out; the next ones last an hour.
    const credentials = async () =>
      asked++ === 0
        ? { ...secrets[0]!, expiration: new Date(Date.now() + 5 * 60_000 + 1_000) }
        : { ...secrets[1]!, expiration: new Date(Date.now() + 3_600_000) };
    const client = createDynamoDbClient({ endpoint: verifier.endpoint, clientConfig: { credentials } });
    try {
      await client.send(new GetCommand({ TableName: table.tableName, Key: key() }));
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await client.send(new GetCommand({ TableName: table.tableName, Key: key() }));
    } finally {
      closeDynamoDbClient(client);
      await verifier.stop();
    }
    expect(verifier.checked().map((c) => [c.valid, c.accessKeyId])).toEqual([
      [true, 'AKIDFIRST'],
      [true, 'AKIDSECOND'],
    ]);
  });
});

describe('the endpoint the SDK resolves from the environment', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  /** The host the client would send to: the request as built, stopped before it is signed and sent. */
  async function resolvedHost(env: Record<string, string>): Promise<string> {
    for (const name of [
      'DYNAMODB_ENDPOINT',
      'AWS_ENDPOINT_URL',
      'AWS_ENDPOINT_URL_DYNAMODB',
      'AWS_USE_FIPS_ENDPOINT',
      'AWS_USE_DUALSTACK_ENDPOINT',
    ])
      vi.stubEnv(name, undefined);
    for (const [name, value] of Object.entries({
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'AKIDENV',
      AWS_SECRET_ACCESS_KEY: 'secret',
      ...env,
    }))
      vi.stubEnv(name, value);
    const client = createDynamoDbClient();
    let host = '';
    client.middlewareStack.add(
      () => async (args) => {
        const request = args.request as { hostname: string; port?: number };
        host = `${request.hostname}${request.port ? `:${request.port}` : ''}`;
        throw new Error('stopped before sending');
      },
      { step: 'build', name: 'captureHost' },
    );
    await client.send(new GetItemCommand({ TableName: 't', Key: { pk: { S: 'x' }, sk: { S: 'y' } } })).catch(() => {});
    closeDynamoDbClient(client);
    return host;
  }

  it("is the region's by default, and follows AWS_ENDPOINT_URL_DYNAMODB, FIPS and dual-stack settings", async () => {
    expect(await resolvedHost({})).toBe('dynamodb.us-east-1.amazonaws.com');
    expect(await resolvedHost({ AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:8123' })).toBe('127.0.0.1:8123');
    expect(await resolvedHost({ AWS_USE_FIPS_ENDPOINT: 'true' })).toBe('dynamodb-fips.us-east-1.amazonaws.com');
    expect(await resolvedHost({ AWS_USE_DUALSTACK_ENDPOINT: 'true' })).toBe('dynamodb.us-east-1.api.aws');
    expect(await resolvedHost({ AWS_REGION: 'cn-north-1' })).toBe('dynamodb.cn-north-1.amazonaws.com.cn');
  });
});

describe('connections', () => {
  /** A stand-in DynamoDB that answers every request with an empty item, keeping the connection alive; it counts connections. */
  async function keptAliveServer() {
    const sockets: Socket[] = [];
    const server = createServer((_req, res) => {
      _req.resume();
      _req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' }).end('{}'));
    });
    server.on('connection', (socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets, server };
  }
  const get = (client: ReturnType<typeof createDynamoDbClient>) => client.send(new GetCommand({ TableName: 't', Key: key() }));

  it('destroy() on a client createDynamoDbClient made closes its connection; over your own client it leaves it open', async () => {
    const { endpoint, sockets, server } = await keptAliveServer();
    try {
      const made = createDynamoDbClient({ endpoint });
      await get(made);
      expect(sockets).toHaveLength(1);
      const closed = new Promise((resolve) => sockets[0]!.once('close', resolve));
      made.destroy();
      await get(made);
      expect(sockets).toHaveLength(2);
      await closed;
      made.destroy();

      const own = new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
      const over = createDynamoDbClient({ awsSdkV3Client: own });
      await get(over);
      over.destroy();
      await get(over);
      expect(sockets).toHaveLength(3);
      own.destroy();
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
