import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startDynamoDbLocal, type DynamoDbLocal } from '../../lambdas/local/dynamodb-local';

/**
 * The DynamoDB Local that `npm start` launches takes any credentials: reachable from another host, anyone could
 * delete or forge records (and so make a key run twice). It listens on the loopback address only.
 */
const outside = Object.values(networkInterfaces())
  .flat()
  .find((address) => address && address.family === 'IPv4' && !address.internal)?.address;

/** 'connected', or the error code of the attempt (ECONNREFUSED when nothing listens there). */
function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.setTimeout(5000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

describe('the DynamoDB Local that npm start launches', () => {
  let dynamo: DynamoDbLocal;
  beforeAll(async () => {
    // This launcher, not the test run's emulator (DYNAMODB_ENDPOINT would be used instead).
    vi.stubEnv('DYNAMODB_ENDPOINT', undefined);
    try {
      dynamo = await startDynamoDbLocal();
    } finally {
      vi.unstubAllEnvs();
    }
  }, 60_000);
  afterAll(() => dynamo?.stop());

  it('answers on 127.0.0.1, with any credentials', async () => {
    const client = new DynamoDBClient({
      endpoint: dynamo.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'made', secretAccessKey: 'up' },
    });
    await expect(client.send(new ListTablesCommand({}))).resolves.toHaveProperty('TableNames');
    client.destroy();
  });

  it.skipIf(outside === undefined)("refuses a connection to the machine's other addresses", async () => {
    const { port } = new URL(dynamo.endpoint);
    expect(await tryConnect('127.0.0.1', Number(port))).toBe('connected');
    expect(await tryConnect(outside!, Number(port))).toBe('ECONNREFUSED');
  });
});
