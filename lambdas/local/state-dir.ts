import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DEV_KEY_FILE } from '../auth/dev-keys';
import { OPERATION_ID_SECRET_FILE } from '../runtime/operation-id-secret';

/** Where the parts of the state live: the signing key's folder, and the emulator's data when it runs on ours. */
export interface StateParts {
  authDir: string;
  /** DynamoDB Local's data folder, only when `npm start` launched the emulator (not with DYNAMODB_ENDPOINT). */
  dataDir?: string;
}

/**
 * What `npm start` keeps in its state folder (`.local/`), and the explanation a user gets when it vanishes under a
 * running server: without it every write fails (DynamoDB Local's files are gone) and the next start makes a new
 * signing key, so tokens already handed to agents stop working.
 */
function stateDirContents(dir: string, parts: StateParts = { authDir: join(dir, 'auth'), dataDir: join(dir, 'dynamodb') }) {
  return [
    ...(parts.dataDir ? [{ path: parts.dataDir, what: "DynamoDB Local's data (records, orders, outbox events, the sandbox ledger)" }] : []),
    { path: join(parts.authDir, DEV_KEY_FILE), what: 'the key that signs and verifies local bearer tokens' },
    { path: join(dir, OPERATION_ID_SECRET_FILE), what: 'the secret that signs operation ids' },
  ];
}

/** Why the state folder no longer serves this process, or undefined while every part of it is there. */
function missingState(dir: string, parts?: StateParts): string | undefined {
  const missing = stateDirContents(dir, parts).filter((part) => !existsSync(part.path));
  if (missing.length === 0) return undefined;
  return [
    `${dir} was deleted (or emptied) while npm start was running; gone: ${missing.map((part) => `${part.path} (${part.what})`).join('; ')}.`,
    'Writes fail from now on, and the next start makes a new signing key: tokens printed before it will be refused.',
    'Stopping. Run npm start again, then hand your agents the new token it prints.',
  ].join('\n');
}

/** Checks the folder every `intervalMs`; calls `onLost` once with the explanation. Returns a function that stops watching. */
export function watchStateDir(dir: string, parts: StateParts, onLost: (explanation: string) => void, intervalMs = 1000): () => void {
  const timer = setInterval(() => {
    const explanation = missingState(dir, parts);
    if (explanation === undefined) return;
    clearInterval(timer);
    onLost(explanation);
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
