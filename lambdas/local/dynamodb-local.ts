import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import {
  answers,
  type Emulator,
  emulatorFolder,
  JETTY_CONFIG,
  JVM_FLAGS,
  javaOptions,
  launch,
  waitUntilReady,
} from './dynamodb-local-process';
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
}

/** Restarts tried in a row before giving up; the count starts over once a restarted emulator has stayed up a while. */
const MAX_RESTART_ATTEMPTS = 5;
const STAYED_UP_MS = 60_000;
/** How long a start waits for the emulator of a server that died to be stopped by its watchdog. */
const ORPHAN_WAIT_MS = 15_000;
export const LOCK_FILE = 'emulator.lock';

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
  // The same emulator, built by the Jetty the jar ships from lambdas/local/dynamodb-local.xml, listens on 127.0.0.1 only.
  const args = [...javaOptions(emulatorDir), ...classPath(emulatorDir), 'org.eclipse.jetty.xml.XmlConfiguration', `port=${port}`];
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
