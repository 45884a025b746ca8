/**
 * A process that owns a DynamoDB Local on a data folder (as `npm start` does) and keeps it busy with a burst of
 * writes until it is killed. Prints one JSON line `{ pid, endpoint }` once the emulator answers.
 * `--leak`: also starts a long-lived process that inherits copies of every descriptor this one opened for the
 * emulator (as a child spawned without close-on-exec would), so the watchdog's pipe stays open after we die.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import { DynamoDBClient, CreateTableCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';

const [dbPath, flag] = process.argv.slice(2);
const socketFds = () =>
  new Set(
    readdirSync('/proc/self/fd')
      .map(Number)
      .filter(
        (fd) =>
          fd > 2 &&
          /^socket:|^pipe:/.test(
            String(
              (() => {
                try {
                  return readlinkSync(`/proc/self/fd/${fd}`);
                } catch {
                  return '';
                }
              })(),
            ),
          ),
      ),
  );
const before = socketFds();
const emulator = await startDynamoDbLocal({ dbPath, log: () => {} });
let holder: number | undefined;
if (flag === '--leak') {
  const leaked = [...socketFds()].filter((fd) => !before.has(fd));
  const stdio: Array<'ignore' | number> = ['ignore', 'ignore', 'ignore'];
  for (const fd of leaked) stdio[fd] = fd;
  const child = spawn('sleep', ['600'], { stdio, detached: true });
  child.unref();
  holder = child.pid;
}
const client = new DynamoDBClient({
  endpoint: emulator.endpoint,
  region: 'local',
  credentials: { accessKeyId: 'l', secretAccessKey: 'l' },
});
await client
  .send(
    new CreateTableCommand({
      TableName: 'burst',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  )
  .catch(() => {});
process.stdout.write(`${JSON.stringify({ pid: emulator.pid, endpoint: emulator.endpoint, holder })}\n`);
// The burst: 16 writers, forever (until SIGKILL).
let n = 0;
for (let w = 0; w < 16; w++) {
  void (async () => {
    for (;;) await client.send(new PutItemCommand({ TableName: 'burst', Item: { pk: { S: `item-${n++}` } } })).catch(() => {});
  })();
}
