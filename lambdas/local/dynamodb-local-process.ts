/**
 * DynamoDB Local as a process: where its jar is (the npm package amplify-dynamodb-simulator), the Java flags and the
 * Jetty configuration it starts with, the watchdog that stops it when its owner is gone, and whether it answers.
 * lambdas/local/dynamodb-local.ts starts, restarts and locks it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { packageFile } from '../../lib/package-root';

/** How long a stopped emulator may take to flush and exit before it is killed. */
const GRACEFUL_STOP_SECONDS = 10;

/** The Jetty configuration that binds the emulator to 127.0.0.1 (shipped beside the build once packed). */
export const JETTY_CONFIG = packageFile('lambdas/local/dynamodb-local.xml', 'dist/dynamodb-local.xml');

/** The folder of the DynamoDB Local jar that the npm package amplify-dynamodb-simulator ships, or one sentence saying how to get it. */
export function emulatorFolder(): string {
  for (const from of [join(process.cwd(), 'package.json'), import.meta.url]) {
    try {
      const require = createRequire(from);
      return join(dirname(require.resolve('amplify-dynamodb-simulator/package.json')), 'emulator');
    } catch {
      // not from there
    }
  }
  throw new Error(
    'DynamoDB Local comes from the npm package amplify-dynamodb-simulator, not installed here: npm install -D amplify-dynamodb-simulator (or set DYNAMODB_ENDPOINT to a running DynamoDB)',
  );
}

export const JVM_FLAGS = [
  '-Dorg.eclipse.jetty.LEVEL=WARN',
  '-Dorg.eclipse.jetty.util.log.announce=false',
  '-Xms64m',
  '-XX:+UseSerialGC',
  // C1 only: the C2 compiler's work does not pay back in an emulator that lives minutes (docs/development.md,
  // "How long the suite takes": about a quarter less CPU for a start and a workload, and a faster start).
  '-XX:TieredStopAtLevel=1',
];
export const javaOptions = (emulatorDir: string) => [`-Djava.library.path=${join(emulatorDir, 'DynamoDBLocal_lib')}`, ...JVM_FLAGS];

export interface Emulator {
  pid: number;
  readonly running: boolean;
  /** Resolves with how Java ended (never rejects). */
  exited: Promise<string>;
  /** SIGTERM (Java flushes and exits), SIGKILL only if it has not exited after GRACEFUL_STOP_SECONDS. */
  stop(): Promise<void>;
}

/**
 * The watchdog between us and Java. Java outlives a parent that dies by SIGKILL; this shell stops it
 * (SIGTERM, then SIGKILL after the grace period) when either
 * - its stdin closes: we stopped it, or our process ended and the kernel closed our end of the pipe; or
 * - our process is gone: a copy of our end of the pipe that another process inherited would keep stdin open, and
 *   a watchdog that only waits for end-of-file would then wait for that process too.
 * Java gets neither the pipe nor our stdout, so only we hold them. It prints Java's pid first; it exits with Java's status.
 */
const JAVA_WATCHDOG = [
  'owner=$1; grace=$2; shift 2',
  // A background job's stdin is /dev/null in a non-interactive shell: the helpers read the pipe as fd 3.
  'exec 3<&0 </dev/null',
  '"$@" >/dev/null 3<&- &',
  'j=$!',
  'echo "$j"',
  'exec >/dev/null',
  'stop() { kill -TERM "$j" 2>/dev/null; n=0; while kill -0 "$j" 2>/dev/null && [ "$n" -lt "$grace" ]; do sleep 1; n=$((n+1)); done; kill -KILL "$j" 2>/dev/null; }',
  '(read -r _ <&3; stop) &',
  'r=$!',
  '(exec 3<&-; while kill -0 "$owner" 2>/dev/null && kill -0 "$j" 2>/dev/null; do sleep 1; done; stop) &',
  'p=$!',
  'exec 3<&-',
  'wait "$j"; s=$?',
  'kill "$r" "$p" 2>/dev/null',
  'exit "$s"',
].join('\n');

export async function launch(emulatorDir: string, args: string[], endpoint: string): Promise<Emulator> {
  const child = spawn(
    '/bin/sh',
    ['-c', JAVA_WATCHDOG, 'dynamodb-local', String(process.pid), String(GRACEFUL_STOP_SECONDS), process.env.JAVA ?? 'java', ...args],
    // Its own process group: a Ctrl-C in the terminal reaches us, and we stop Java cleanly (a SIGINT to Java and
    // the shell at once would end the shell before Java has exited).
    { cwd: emulatorDir, stdio: ['pipe', 'pipe', 'pipe'], detached: true },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  let running = true;
  const exited = new Promise<string>((resolvePromise) => {
    child.once('error', (err) => {
      running = false;
      resolvePromise(`could not start (is Java 17 installed?): ${err.message}`);
    });
    child.once('exit', (code, signal) => {
      running = false;
      const why = signal ? `signal ${signal}` : code !== null && code > 128 ? `killed by signal ${code - 128}` : `code ${code}`;
      resolvePromise(stderr.trim() ? `${why}: ${stderr.trim().slice(-500)}` : why);
    });
  });
  const failed = exited.then((status) => Promise.reject(new Error(`DynamoDB Local exited: ${status}`)));
  failed.catch(() => {});
  const pid = await Promise.race([
    new Promise<number>((resolvePromise) => {
      createInterface({ input: child.stdout! }).once('line', (line) => resolvePromise(Number(line)));
    }),
    failed,
  ]);
  const emulator: Emulator = {
    pid,
    get running() {
      return running;
    },
    exited,
    stop: async () => {
      if (!running) return;
      child.stdin?.end();
      // The watchdog kills Java itself after the grace period; this is for a watchdog that is gone too.
      const timer = setTimeout(
        () => {
          for (const target of [pid, child.pid]) {
            try {
              if (target) process.kill(target, 'SIGKILL');
            } catch {
              // already gone
            }
          }
        },
        (GRACEFUL_STOP_SECONDS + 5) * 1000,
      );
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await Promise.race([waitUntilReady(endpoint, 30_000), failed]);
  } catch (err) {
    await emulator.stop();
    throw err;
  }
  return emulator;
}

export async function answers(endpoint: string, timeoutMs = 1_000): Promise<boolean> {
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
    requestHandler: { requestTimeout: timeoutMs, connectionTimeout: timeoutMs, throwOnRequestTimeout: true },
  });
  try {
    await client.send(new ListTablesCommand({ Limit: 1 }));
    return true;
  } catch {
    return false;
  } finally {
    client.destroy();
  }
}

export async function waitUntilReady(endpoint: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await answers(endpoint))) {
    if (Date.now() > deadline) throw new Error(`DynamoDB at ${endpoint} did not answer within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 150));
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
