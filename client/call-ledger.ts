import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { systemClock, type Clock } from '../lambdas/core/clock';
import { canonicalJson } from '../lambdas/core/fingerprint';
import type { WriteToolResult } from '../lambdas/core/result-contract';

/** Where a call stands, as far as this agent knows (`LedgerEntry['state']`). */
export type CallState = LedgerEntry['state'];

const SETTLED: ReadonlySet<CallState> = new Set(['succeeded', 'failed']);

/**
 * Which intent a call belongs to: the same identity gets the same key.
 *
 * @public
 */
export interface CallIdentity {
  /** The agent's conversation or run; keys never cross sessions. */
  session: string;
  /** The write tool called. */
  tool: string;
  /** A name the host gives the intent; when set it, not the arguments, identifies the call. */
  intent?: string;
  /** SHA-256 of the canonical business arguments. */
  fingerprint: string;
}

/**
 * One write call in the ledger: its key, its state, its result once known.
 * @public
 */
export interface LedgerEntry extends CallIdentity {
  /** What the server deduplicates on: the idempotency_key we generated, or the operation_id it issued. */
  key: string;
  /** Which argument carries `key`: a client-generated `idempotency_key`, or an `operation_id` the server issued. */
  keyKind: 'idempotency_key' | 'operation_id';
  /** Where the call stands, as far as this agent knows. */
  state: 'submitted' | 'in_progress' | 'succeeded' | 'failed' | 'unknown';
  /** Requests sent for this intent, over all calls. */
  attempts: number;
  /** When the intent was first recorded (epoch ms, the ledger's clock). */
  createdAt: number;
  /** The last change (epoch ms). */
  updatedAt: number;
  /** When the ledger forgets the entry (epoch ms): `ttlMs` after the last change once settled, never past `maxAgeMs` from `createdAt`. */
  expiresAt: number;
  /** The outcome of the last answer the server gave; absent until one came. */
  lastOutcome?: WriteToolResult['outcome'];
  /** The state is the server's final answer (not retryable): later non-final answers (an outage) leave it as it is. */
  final?: boolean;
  /** The contract's error code, or a short transport description. */
  lastError?: string;
  /** The last status line (ids and outcome, no arguments). */
  status?: string;
  /** A request with `key` may have reached the server: sending it again is likely a replay (and says so). */
  sent?: boolean;
}

/**
 * How long a `CallLedger` keeps its entries, its clock, and the file it keeps them in.
 * @public
 */
export interface CallLedgerOptions {
  /** How long after its last answer a settled intent keeps its key, so a re-plan gets the replay. Default 15 min. */
  ttlMs?: number;
  /**
   * Hard cap on an entry's life from its creation, and the life of unsettled entries (an `unknown` call keeps
   * its key until it settles). Keep it below the server's retention (24 h by default): a key reused after
   * the server forgot it would execute again. Default 12 h.
   */
  maxAgeMs?: number;
  /** Epoch ms. Default `Date.now`. */
  clock?: Clock;
  /** A JSON file that keeps the ledger across restarts (written atomically: temp file + rename). */
  file?: string;
}

interface LedgerFile {
  version: 1;
  entries: LedgerEntry[];
}

const DEFAULT_TTL_MS = 15 * 60_000;
const DEFAULT_MAX_AGE_MS = 12 * 3600_000;

/**
 * The agent's short-term memory of its write intents and their keys. In memory, optionally mirrored to a file;
 * one process per file (two processes sharing a file would each overwrite the other's entries).
 * The arguments themselves are never stored, only their fingerprint.
 * @public
 */
export class CallLedger {
  private readonly entriesById = new Map<string, LedgerEntry>();
  private readonly ttlMs: number;
  private readonly maxAgeMs: number;
  private readonly clock: Clock;
  /** The JSON file the ledger is kept in (`CallLedgerOptions.file`); undefined: memory only. */
  readonly file: string | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(options: CallLedgerOptions = {}) {
    this.ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
    this.maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
    this.clock = options.clock ?? systemClock;
    this.file = options.file;
  }

  /** A ledger backed by `options.file`, with the entries it holds that have not expired. */
  static async open(options: CallLedgerOptions & { file: string }): Promise<CallLedger> {
    const ledger = new CallLedger(options);
    let text: string;
    try {
      text = await readFile(options.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return ledger;
      throw err;
    }
    // A corrupt ledger is an error, not an empty one: forgetting keys silently could execute an intent twice.
    const parsed = JSON.parse(text) as Partial<LedgerFile>;
    if (parsed.version !== 1 || !Array.isArray(parsed.entries)) {
      throw new Error(`${options.file} is not a call ledger (version 1)`);
    }
    const now = ledger.clock();
    for (const entry of parsed.entries) {
      if (entry.expiresAt > now) ledger.entriesById.set(identityId(entry), entry);
    }
    return ledger;
  }

  /** The live entry of this intent, if any. */
  find(identity: CallIdentity): LedgerEntry | undefined {
    const id = identityId(identity);
    const entry = this.entriesById.get(id);
    if (entry && entry.expiresAt <= this.clock()) {
      this.entriesById.delete(id);
      return undefined;
    }
    return entry;
  }

  /** Records a new intent with its key, in state `submitted`. */
  create(identity: CallIdentity, key: string, keyKind: LedgerEntry['keyKind']): LedgerEntry {
    const now = this.clock();
    const entry: LedgerEntry = {
      session: identity.session,
      tool: identity.tool,
      ...(identity.intent !== undefined ? { intent: identity.intent } : {}),
      fingerprint: identity.fingerprint,
      key,
      keyKind,
      state: 'submitted',
      attempts: 0,
      createdAt: now,
      updatedAt: now,
      expiresAt: now + this.maxAgeMs,
    };
    this.entriesById.set(identityId(identity), entry);
    return entry;
  }

  /** Applies a change to an entry and recomputes its expiry. */
  update(
    entry: LedgerEntry,
    change: Partial<Pick<LedgerEntry, 'key' | 'state' | 'final' | 'attempts' | 'lastOutcome' | 'lastError' | 'status' | 'sent'>>,
  ): LedgerEntry {
    Object.assign(entry, change);
    entry.updatedAt = this.clock();
    const cap = entry.createdAt + this.maxAgeMs;
    entry.expiresAt = SETTLED.has(entry.state) ? Math.min(entry.updatedAt + this.ttlMs, cap) : cap;
    return entry;
  }

  /** Live entries, oldest first. */
  entries(): LedgerEntry[] {
    const now = this.clock();
    for (const [id, entry] of this.entriesById) if (entry.expiresAt <= now) this.entriesById.delete(id);
    return [...this.entriesById.values()].sort((a, b) => a.createdAt - b.createdAt);
  }

  /** Writes the ledger to its file (no-op without one). Writes are serialised, each one the latest state. */
  persist(): Promise<void> {
    const file = this.file;
    if (!file) return Promise.resolve();
    const write = this.writing.then(() => writeAtomically(file, this.serialise()));
    // The chain survives a failed write; the caller still sees the failure.
    this.writing = write.catch(() => undefined);
    return write;
  }

  private serialise(): string {
    const content: LedgerFile = { version: 1, entries: this.entries() };
    return `${JSON.stringify(content, null, 2)}\n`;
  }
}

/** Intent-named calls are identified by the name; the others by their canonical business arguments. */
export function identityId(identity: CallIdentity): string {
  return identity.intent !== undefined
    ? canonicalJson([identity.session, identity.tool, 'intent', identity.intent])
    : canonicalJson([identity.session, identity.tool, 'args', identity.fingerprint]);
}

/** Temp file in the same directory, fsync, rename: a crash leaves the old file or the new one, never half of one. */
async function writeAtomically(file: string, text: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    // 0600: the keys are what make a retry a replay, so other users of the machine have no business reading them.
    const handle = await open(temp, 'w', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
