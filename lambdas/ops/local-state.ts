import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Where a running `npm start` keeps its data, so `npm run ops` finds it with no flags. */
export interface LocalStackState {
  dynamodbEndpoint: string;
  tableName: string;
  sqsEndpoint: string;
  queueUrl: string;
  deadLetterQueueUrl: string;
  /** The `npm start` process. */
  pid: number;
}

/** In the state directory `npm start` uses (`.local`). */
const LOCAL_STATE_FILE = 'stack.json';

/** What a started local stack tells the review tool (`pid`: the process serving it). */
export interface LocalStackFacts {
  config: { dynamodbEndpoint?: string; tableName: string };
  queue: { endpoint: string; queueUrl: string; deadLetterQueueUrl: string };
}

export function stateOf(stack: LocalStackFacts, pid = process.pid): LocalStackState {
  if (!stack.config.dynamodbEndpoint) throw new Error('the local stack has no DynamoDB endpoint');
  return {
    dynamodbEndpoint: stack.config.dynamodbEndpoint,
    tableName: stack.config.tableName,
    sqsEndpoint: stack.queue.endpoint,
    queueUrl: stack.queue.queueUrl,
    deadLetterQueueUrl: stack.queue.deadLetterQueueUrl,
    pid,
  };
}

/** Written once the stack is up; the returned function removes it again (on Ctrl-C). */
export async function writeLocalState(dir: string, state: LocalStackState): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, LOCAL_STATE_FILE);
  await writeFile(file, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  return () => rm(file, { force: true });
}

/** The state of a running `npm start`, or undefined when there is none (no file, or its process is gone). */
export async function readLocalState(dir: string): Promise<LocalStackState | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, LOCAL_STATE_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const state = JSON.parse(text) as LocalStackState;
  try {
    process.kill(state.pid, 0);
  } catch (err) {
    // EPERM: it exists but is someone else's; only ESRCH means it is gone (killed without removing its file).
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
  }
  return state;
}
