import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { freePort } from './free-port';

export interface DynamoDbLocal {
  endpoint: string;
  /** Stops the emulator if we started it; a no-op for a user-provided DYNAMODB_ENDPOINT. */
  stop(): Promise<void>;
}

export interface StartDynamoDbLocalOptions {
  /** Keep data in this folder (survives restarts). Default: in memory. */
  dbPath?: string;
  port?: number;
}

/**
 * Uses DYNAMODB_ENDPOINT when set (e.g. a Docker `amazon/dynamodb-local`), otherwise launches the
 * official DynamoDB Local jar that `amplify-dynamodb-simulator` ships, so `npm ci` is all it takes.
 */
export async function startDynamoDbLocal(options: StartDynamoDbLocalOptions = {}): Promise<DynamoDbLocal> {
  const given = process.env.DYNAMODB_ENDPOINT;
  if (given) {
    await waitUntilReady(given, 15_000);
    return { endpoint: given, stop: async () => {} };
  }
  const require = createRequire(import.meta.url);
  const emulatorDir = join(dirname(require.resolve('amplify-dynamodb-simulator/package.json')), 'emulator');
  const port = options.port ?? (await freePort());
  const args = [
    `-Djava.library.path=${join(emulatorDir, 'DynamoDBLocal_lib')}`,
    '-Xms64m',
    '-XX:+UseSerialGC',
    '-jar',
    join(emulatorDir, 'DynamoDBLocal.jar'),
    '-port',
    String(port),
    '-sharedDb',
  ];
  if (options.dbPath) {
    const dbPath = resolve(options.dbPath);
    mkdirSync(dbPath, { recursive: true });
    args.push('-dbPath', dbPath);
  } else {
    args.push('-inMemory');
  }
  // Java outlives a parent that dies by SIGKILL or a timeout. A shell in between holds a pipe from us: when it
  // closes (we exited, however), the shell stops Java. A normal stop closes the pipe the same way.
  const child = spawn('/bin/sh', ['-c', JAVA_WATCHDOG, 'dynamodb-local', process.env.JAVA ?? 'java', ...args], {
    cwd: emulatorDir,
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`could not start DynamoDB Local (is Java 17 installed?): ${err.message}`)));
    child.once('exit', (code) => reject(new Error(`DynamoDB Local exited with code ${code}: ${stderr}`)));
  });
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await Promise.race([waitUntilReady(endpoint, 30_000), exited]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  exited.catch(() => {});
  return {
    endpoint,
    stop: async () => {
      child.stdin?.end();
      await stopChild(child);
    },
  };
}

/** Runs Java in the background and stops it when our end of stdin closes; exits with Java's status. */
const JAVA_WATCHDOG = 'exec 3<&0; "$@" & j=$!; (read -r _ <&3; kill $j 2>/dev/null) & wait $j';

async function waitUntilReady(endpoint: string, timeoutMs: number): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await client.send(new ListTablesCommand({ Limit: 1 }));
        return;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`DynamoDB at ${endpoint} did not answer within ${timeoutMs} ms: ${String(err)}`);
        await new Promise((r) => setTimeout(r, 150));
      }
    }
  } finally {
    client.destroy();
  }
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
