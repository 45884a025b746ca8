import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import {
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { packageFile } from '../lib/package-root';
import { freePort } from './free-port';
import { isAlive, underLock } from './process-lock';

export interface DynamoDbLocal {
  endpoint: string;
  /** The running Java process, if we started one (it changes when the emulator is restarted). */
  readonly pid: number | undefined;
  /** The data folder of an emulator we launched on one; undefined in memory or for a user-provided DYNAMODB_ENDPOINT. */
  readonly dbPath?: string;
  /** Whether the emulator answers now (a user-provided endpoint is asked; ours is asked only while it runs). */
  reachable(): Promise<boolean>;
  /** Stops the emulator if we started it (gracefully: its data is flushed); a no-op for a user-provided DYNAMODB_ENDPOINT. */
  stop(): Promise<void>;
}

export interface StartDynamoDbLocalOptions {
  /** Keep data in this folder (survives restarts). Default: in memory. */
  dbPath?: string;
  port?: number;
  /**
   * Start the emulator again on the same data when it dies (not when we stop it). Default: on with `dbPath`,
   * off in memory (a restarted in-memory emulator would be empty).
   */
  restartOnExit?: boolean;
  /** Where the supervision's lines go (one per event). Default: console.error. */
  log?: (line: string) => void;
  /**
   * The wait before the first restart in a row, doubled for each next one: a folder or port that is briefly busy gets
   * time to free up. Default: 500 ms.
   */
  restartBackoffMs?: number;
  /**
   * 'quick' (default): the JVM's first compiler only, which starts faster and costs less for the minutes a test's
   * emulator lives. 'full': both compilers, for a long steady workload (the bench): with the first only, the
   * emulator's own Java work per request (it parses the table's schema on every request, on the one thread all its
   * SQLite work runs on) takes about twice as long, and that thread sets the pace at load.
   */
  jit?: 'quick' | 'full';
}

/** Restarts tried in a row before giving up; the count starts over once a restarted emulator has stayed up a while. */
export const MAX_RESTART_ATTEMPTS = 5;
const STAYED_UP_MS = 60_000;
/** How long a stopped emulator may take to flush and exit before it is killed. */
export const GRACEFUL_STOP_SECONDS = 10;
/** How long a start waits for the emulator of a server that died to be stopped by its watchdog. */
const ORPHAN_WAIT_MS = 15_000;
export const LOCK_FILE = 'emulator.lock';

/** The Jetty configuration that binds the emulator to 127.0.0.1 (shipped beside the build once packed). */
const JETTY_CONFIG = packageFile('local/dynamodb-local.xml', 'dist/dynamodb-local.xml');

/** The folder of the DynamoDB Local jar that the npm package amplify-dynamodb-simulator ships, or one sentence saying how to get it. */
function emulatorFolder(): string {
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

/**
 * Uses DYNAMODB_ENDPOINT when set (e.g. a Docker `amazon/dynamodb-local`), otherwise launches the
 * official DynamoDB Local jar that `amplify-dynamodb-simulator` ships, so `npm ci` is all it takes.
 *
 * With a data folder, a lock file in it names the emulator that holds it: a second start on the same folder waits
 * for an emulator whose server died, and refuses one that is still in use.
 */
export async function startDynamoDbLocal(options: StartDynamoDbLocalOptions = {}): Promise<DynamoDbLocal> {
  const given = process.env.DYNAMODB_ENDPOINT;
  if (given) {
    await waitUntilReady(given, 15_000);
    return { endpoint: given, pid: undefined, reachable: () => answers(given), stop: async () => {} };
  }
  const emulatorDir = emulatorFolder();
  const port = options.port ?? (await freePort());
  const endpoint = `http://127.0.0.1:${port}`;
  const log = options.log ?? ((line: string) => console.error(line));
  // Not `-jar DynamoDBLocal.jar`: its launcher listens on every interface, and the emulator takes any credentials.
  // The same emulator, built by the Jetty the jar ships from local/dynamodb-local.xml, listens on 127.0.0.1 only.
  const jvm = options.jit === 'full' ? javaOptions(emulatorDir).filter((flag) => flag !== QUICK_JIT) : javaOptions(emulatorDir);
  const args = [...jvm, ...classPath(emulatorDir), 'org.eclipse.jetty.xml.XmlConfiguration', `port=${port}`];
  let lock: DataFolderLock | undefined;
  if (options.dbPath) {
    const dbPath = resolve(options.dbPath);
    mkdirSync(dbPath, { recursive: true });
    lock = await DataFolderLock.acquire(dbPath, log);
    args.push('inMemory=false', `dbPath=${dbPath}`);
  } else {
    args.push('inMemory=true');
  }
  args.push(JETTY_CONFIG);

  let current: Emulator;
  try {
    current = await launch(emulatorDir, args, endpoint);
  } catch (err) {
    lock?.release();
    throw err;
  }
  lock?.holdBy(current.pid);

  let stopping = false;
  let attempts = 0;
  let stayedUp: NodeJS.Timeout | undefined;
  const restartOnExit = options.restartOnExit ?? Boolean(options.dbPath);
  const restartBackoffMs = options.restartBackoffMs ?? 500;
  let restarting: Promise<void> | undefined;

  const supervise = (emulator: Emulator) => {
    void emulator.exited.then((status) => {
      if (stopping || emulator !== current) return;
      clearTimeout(stayedUp);
      if (!restartOnExit) {
        log(`DynamoDB Local (pid ${emulator.pid}) exited (${status}); it is not restarted (in memory: its data is gone).`);
        return;
      }
      restarting = restartLoop(emulator, status);
    });
  };

  const restartLoop = async (dead: Emulator, status: string) => {
    let reason = `DynamoDB Local (pid ${dead.pid}) exited (${status})`;
    while (!stopping) {
      if (attempts >= MAX_RESTART_ATTEMPTS) {
        log(`${reason}; giving up after ${MAX_RESTART_ATTEMPTS} restarts: the store stays unreachable until npm start is restarted.`);
        return;
      }
      attempts += 1;
      await new Promise((r) => setTimeout(r, restartBackoffMs * 2 ** (attempts - 1)));
      if (stopping) return;
      log(`${reason}; restarting it on the same data (attempt ${attempts} of ${MAX_RESTART_ATTEMPTS}).`);
      try {
        const next = await launch(emulatorDir, args, endpoint);
        if (stopping) {
          await next.stop();
          return;
        }
        current = next;
        lock?.holdBy(next.pid);
        log(`DynamoDB Local is back (pid ${next.pid}) on ${endpoint}.`);
        stayedUp = setTimeout(() => (attempts = 0), STAYED_UP_MS);
        stayedUp.unref();
        supervise(next);
        return;
      } catch (err) {
        reason = `DynamoDB Local did not start (${(err as Error).message.split('\n')[0]})`;
      }
    }
  };
  supervise(current);

  return {
    endpoint,
    dbPath: options.dbPath ? resolve(options.dbPath) : undefined,
    get pid() {
      return current.running ? current.pid : undefined;
    },
    reachable: async () => current.running && (await answers(endpoint)),
    stop: async () => {
      stopping = true;
      clearTimeout(stayedUp);
      await restarting;
      await current.stop();
      lock?.release();
    },
  };
}

const QUICK_JIT = '-XX:TieredStopAtLevel=1';
const JVM_FLAGS = [
  '-Dorg.eclipse.jetty.LEVEL=WARN',
  '-Dorg.eclipse.jetty.util.log.announce=false',
  '-Xms64m',
  '-XX:+UseSerialGC',
  // C1 only: the C2 compiler's work does not pay back in an emulator that lives minutes (docs/development.md,
  // "How long the suite takes": about a quarter less CPU for a start and a workload, and a faster start).
  QUICK_JIT,
];
const javaOptions = (emulatorDir: string) => [`-Djava.library.path=${join(emulatorDir, 'DynamoDBLocal_lib')}`, ...JVM_FLAGS];

/**
 * The emulator's classes in a class-data-sharing archive (the JDK's AppCDS: classes parsed and verified once, mapped
 * at each start), made by `makeDynamoDbLocalArchive` once per machine into node_modules/.cache/dynamodb-local:
 * loading and verifying the emulator's thousands of classes is most of a start's CPU. Java refuses to archive
 * a class path with a folder in it, and DynamoDBLocal.jar's manifest names its own folder (`Class-Path: .
 * DynamoDBLocal_lib/...`): the archive's class path is a copy of that jar without the manifest's `Class-Path`, then
 * the jars that line names in its order (the order Java searched them), then the rest of DynamoDBLocal_lib.
 */
function archiveDir(emulatorDir: string): string {
  // The emulator's release (its jar's checksum, shipped beside it), the java command and the flags the archive is made for.
  const key = createHash('sha256')
    .update(readFileSync(join(emulatorDir, 'sha256')))
    .update(process.env.JAVA ?? 'java')
    .update(JVM_FLAGS.join(' '))
    .digest('hex')
    .slice(0, 16);
  return join(emulatorDir, '..', '..', '.cache', 'dynamodb-local', key);
}
const ARCHIVE = 'classes.jsa';
const ARCHIVE_CLASS_PATH = 'class-path';

/**
 * `-cp` and, once the archive is made, the archive. Java checks the archive against the JVM and the class path
 * (each jar's size and time) at every start, and starts without it on any difference (never fails for it).
 */
function classPath(emulatorDir: string): string[] {
  const dir = archiveDir(emulatorDir);
  if (existsSync(join(dir, ARCHIVE))) {
    try {
      return [`-XX:SharedArchiveFile=${join(dir, ARCHIVE)}`, '-cp', readFileSync(join(dir, ARCHIVE_CLASS_PATH), 'utf8')];
    } catch {
      // Half removed: start as without it.
    }
  }
  return ['-cp', `${join(emulatorDir, 'DynamoDBLocal.jar')}:${join(emulatorDir, 'DynamoDBLocal_lib', '*')}`];
}

/**
 * Makes the emulator's class-data-sharing archive (see `archiveDir`) unless it exists or another process is making
 * it: one run of the emulator with a typical workload lists the classes it loads, then `java -Xshare:dump` archives
 * them (once per machine: a fresh clone's test run makes it beside its first files). Resolves true once the archive
 * is there (made here or by the process that was making it); false if it could not be made (starts go on without it).
 */
export async function makeDynamoDbLocalArchive(): Promise<boolean> {
  const emulatorDir = emulatorFolder();
  const dir = archiveDir(emulatorDir);
  mkdirSync(dirname(dir), { recursive: true });
  await underLock(
    `${dir}.lock`,
    () => existsSync(join(dir, ARCHIVE)),
    () => makeArchive(emulatorDir, dir),
  );
  return existsSync(join(dir, ARCHIVE));
}

/** Makes the archive in `dir`; on any failure leaves none (starts go on without it). */
async function makeArchive(emulatorDir: string, dir: string): Promise<void> {
  let emulator: Emulator | undefined;
  try {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    // Only here (a test run's set-up): the package's commands start the emulator without it.
    const { default: JSZip } = await import('jszip');
    const jar = await JSZip.loadAsync(readFileSync(join(emulatorDir, 'DynamoDBLocal.jar')));
    const manifest = (await jar.file('META-INF/MANIFEST.MF')!.async('string')).replace(/\r?\n /g, '');
    const named =
      /^Class-Path: (.*)$/m
        .exec(manifest)?.[1]
        ?.split(/\s+/)
        .filter((entry) => entry.endsWith('.jar')) ?? [];
    jar.file('META-INF/MANIFEST.MF', manifest.replace(/^Class-Path: .*\r?\n/m, ''));
    writeFileSync(join(dir, 'DynamoDBLocal.jar'), await jar.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' }));
    const cp = [
      join(dir, 'DynamoDBLocal.jar'),
      ...named.map((entry) => join(emulatorDir, entry)),
      join(emulatorDir, 'DynamoDBLocal_lib', '*'),
    ].join(':');
    const classList = join(dir, 'classes.list');
    const port = await freePort();
    const endpoint = `http://127.0.0.1:${port}`;
    const listing = [
      ...javaOptions(emulatorDir),
      `-XX:DumpLoadedClassList=${classList}`,
      '-cp',
      cp,
      'org.eclipse.jetty.xml.XmlConfiguration',
      `port=${port}`,
      'inMemory=true',
    ];
    emulator = await launch(emulatorDir, [...listing, JETTY_CONFIG], endpoint);
    await typicalWorkload(endpoint);
    await emulator.stop();
    const java = process.env.JAVA ?? 'java';
    const dump = spawn(
      java,
      [
        ...JVM_FLAGS,
        '-Xshare:dump',
        `-XX:SharedClassListFile=${classList}`,
        `-XX:SharedArchiveFile=${join(dir, `${ARCHIVE}.part`)}`,
        '-cp',
        cp,
      ],
      {
        cwd: emulatorDir,
        stdio: 'ignore',
      },
    );
    const status = await new Promise<number | null>((resolveStatus) => {
      dump.once('error', () => resolveStatus(null));
      dump.once('exit', resolveStatus);
    });
    if (status !== 0) return;
    writeFileSync(join(dir, ARCHIVE_CLASS_PATH), cp);
    renameSync(join(dir, `${ARCHIVE}.part`), join(dir, ARCHIVE));
  } catch {
    await emulator?.stop();
  }
}

/** What the stack asks of DynamoDB (tables with an index, conditional and transactional writes, queries): their classes load. */
async function typicalWorkload(endpoint: string) {
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  try {
    const TableName = 'archive';
    const key = (pk: string) => ({ pk: { S: pk } });
    await client.send(
      new CreateTableCommand({
        TableName,
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'gsi', AttributeType: 'S' },
        ],
        GlobalSecondaryIndexes: [
          { IndexName: 'by-gsi', KeySchema: [{ AttributeName: 'gsi', KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } },
        ],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await client.send(
      new PutItemCommand({
        TableName,
        Item: { ...key('a'), gsi: { S: 'g' }, n: { N: '1' } },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            Update: {
              TableName,
              Key: key('a'),
              UpdateExpression: 'SET n = n + :one, #s = :s',
              ConditionExpression: 'n = :n',
              ExpressionAttributeNames: { '#s': 'st' },
              ExpressionAttributeValues: { ':one': { N: '1' }, ':n': { N: '1' }, ':s': { S: 'x' } },
            },
          },
          { Put: { TableName, Item: { ...key('b'), gsi: { S: 'g' } } } },
        ],
      }),
    );
    await client.send(new GetItemCommand({ TableName, Key: key('a'), ConsistentRead: true }));
    await client.send(
      new QueryCommand({
        TableName,
        IndexName: 'by-gsi',
        KeyConditionExpression: 'gsi = :g',
        ExpressionAttributeValues: { ':g': { S: 'g' } },
      }),
    );
    await client.send(new DeleteItemCommand({ TableName, Key: key('b') }));
    await client.send(new DeleteTableCommand({ TableName }));
  } finally {
    client.destroy();
  }
}

interface Emulator {
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

async function launch(emulatorDir: string, args: string[], endpoint: string): Promise<Emulator> {
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

/** A live process that is DynamoDB Local (where /proc tells; elsewhere, any live process with that pid). */
function isEmulator(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('DynamoDBLocal');
  } catch {
    return true;
  }
}

interface LockContent {
  /** The process that started the emulator (a server, a test run). */
  owner: number;
  /** The emulator's Java process, once it runs. */
  pid?: number;
  started_at: string;
}

/** `<dbPath>/emulator.lock`: which emulator holds the folder. A lock whose processes are all gone is stale and taken over. */
class DataFolderLock {
  private constructor(
    private readonly file: string,
    private content: LockContent,
  ) {}

  static async acquire(dbPath: string, log: (line: string) => void): Promise<DataFolderLock> {
    const file = join(dbPath, LOCK_FILE);
    const content: LockContent = { owner: process.pid, started_at: new Date().toISOString() };
    const deadline = Date.now() + ORPHAN_WAIT_MS;
    let waited = false;
    for (;;) {
      try {
        writeFileSync(file, JSON.stringify(content), { flag: 'wx' });
        return new DataFolderLock(file, content);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      let held: LockContent | undefined;
      try {
        held = JSON.parse(readFileSync(file, 'utf8')) as LockContent;
      } catch {
        // Unreadable or half-written by a process killed mid-write: nothing can be holding the folder through it.
      }
      const ownerAlive = held !== undefined && held.owner !== process.pid && isAlive(held.owner);
      const emulatorAlive = held?.pid !== undefined && isEmulator(held.pid);
      if (!ownerAlive && !emulatorAlive) {
        try {
          unlinkSync(file);
        } catch {
          // another start took it over first; try again
        }
        continue;
      }
      const who = `DynamoDB Local${held?.pid ? ` (pid ${held.pid})` : ''} started by process ${held!.owner}`;
      if (ownerAlive || Date.now() > deadline) {
        throw new Error(
          `${dbPath} is in use by ${who}${ownerAlive ? '' : ', which has exited'}: a second emulator on the same data ` +
            `would corrupt it. Stop that process first (kill ${held?.pid ?? held!.owner}), or use another data folder.`,
        );
      }
      // Its server died: the watchdog is stopping it. Wait for that rather than refuse.
      if (!waited) log(`Waiting for ${who}, which has exited, to stop...`);
      waited = true;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  holdBy(pid: number) {
    this.content = { ...this.content, pid };
    writeFileSync(this.file, JSON.stringify(this.content));
  }

  release() {
    try {
      const now = JSON.parse(readFileSync(this.file, 'utf8')) as LockContent;
      if (now.owner === this.content.owner) unlinkSync(this.file);
    } catch {
      // already gone
    }
  }
}

async function answers(endpoint: string, timeoutMs = 1_000): Promise<boolean> {
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

async function waitUntilReady(endpoint: string, timeoutMs: number): Promise<void> {
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
