/**
 * The checker of a chaos run's history (`npm run chaos` writes `history.jsonl`): the invariants of the spin model
 * (docs/correctness.md), checked on what real calls answered and what the sandbox downstreams recorded.
 *
 * `npx tsx test/models/history-check.ts <history.jsonl>` checks a recorded run again and exits 1 on a violation.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const WRITE_TOOLS = ['create_order', 'send_email', 'create_ticket', 'request_payment'] as const;
export type WriteTool = (typeof WRITE_TOOLS)[number];

/** Which field of a succeeded result names the effect. */
export const RESOURCE_FIELD: Record<WriteTool, string> = {
  create_order: 'order_id',
  send_email: 'event_id',
  create_ticket: 'event_id',
  request_payment: 'payment_id',
};

export interface HistoryAnswer {
  outcome?: string;
  retryable?: boolean;
  code?: string;
  message?: string;
  /** The effect a succeeded answer names. */
  resource?: string;
  /** No answer in the contract: a transport error, an HTTP status. */
  failure?: string;
  /** 0: the intent's own arguments; 1: other arguments with the same key. */
  variant: number;
  sentAt: number;
  answeredAt: number;
}

export interface HistoryIntent {
  id: number;
  tool: WriteTool;
  tenant: string;
  key: string;
  /** Its calls overlapped a SIGKILL of DynamoDB Local: its violations are reported apart. */
  exposed: boolean;
  answers: HistoryAnswer[];
}

export interface LedgerEntry {
  tenant?: string;
  idempotency_key?: string;
  event_id?: string;
  order_id?: string;
  payment_id?: string;
  /** When the effect was applied. */
  created_at?: string;
  /**
   * When the request that made it reached the downstream; earlier than `created_at` for a provider that applies a
   * request later (the sandbox's `late-commit`). Absent: at `created_at`.
   */
  received_at?: string;
}
export type Ledger = Record<'orders' | 'payments' | 'tickets' | 'emails', LedgerEntry[]>;

export interface Violation {
  kind: string;
  detail: string;
  intent?: number;
  exposed: boolean;
}

/** The violation kinds, one per invariant. */
export const Invariant = {
  oneEffect: 'more than one effect per key',
  sameResult: 'succeeded answers name different resources',
  effectExists: 'succeeded without its effect',
  ownArguments: 'succeeded for other arguments than the first',
  settled: 'not settled',
  noFalseNothingRan: 'failed for a key whose effect exists or is on its way',
  eventOnce: 'queued event took effect more than once',
  effectAnswered: 'effect without a succeeded answer',
} as const;

const timeOf = (iso: string | undefined) => (iso ? Date.parse(iso) : Infinity);

/** A final answer: the client stops calling. */
export const settles = (a: { outcome?: string; retryable?: boolean }) =>
  a.outcome === 'succeeded' || a.outcome === 'conflict' || a.outcome === 'rejected' || (a.outcome === 'failed' && a.retryable === false);

export function checkHistory({ intents, ledger }: { intents: readonly HistoryIntent[]; ledger: Ledger }): Violation[] {
  const violations: Violation[] = [];
  const effectsOf = (intent: HistoryIntent): LedgerEntry[] => {
    switch (intent.tool) {
      case 'create_order':
        return ledger.orders.filter((o) => o.tenant === intent.tenant && o.idempotency_key === intent.key);
      case 'request_payment':
        return ledger.payments.filter((p) => p.tenant === intent.tenant && p.idempotency_key === intent.key);
      case 'send_email':
      case 'create_ticket': {
        // Queued effects carry the event id the succeeded answer names.
        const ids = new Set(intent.answers.map((a) => a.resource).filter(Boolean));
        return (intent.tool === 'send_email' ? ledger.emails : ledger.tickets).filter((e) => ids.has(e.event_id));
      }
    }
  };
  const named = new Set<string>();
  for (const intent of intents) {
    // One violation per intent and kind (the history has every call).
    const seen = new Set<string>();
    const add = (kind: string, detail: string) => {
      if (seen.has(kind)) return;
      seen.add(kind);
      violations.push({
        kind,
        detail: `${intent.tool} ${intent.tenant}/${intent.key}: ${detail}`,
        intent: intent.id,
        exposed: intent.exposed,
      });
    };
    const succeeded = intent.answers.filter((a) => a.outcome === 'succeeded');
    const resources = new Set(succeeded.map((a) => a.resource));
    for (const r of resources) if (r) named.add(r);
    const effects = effectsOf(intent);
    if (effects.length > 1) add(Invariant.oneEffect, `${effects.length} effects in the ledger`);
    if (resources.size > 1) add(Invariant.sameResult, [...resources].join(', '));
    const field = RESOURCE_FIELD[intent.tool] as keyof LedgerEntry;
    for (const resource of resources) {
      if (!effects.some((e) => e[field] === resource)) add(Invariant.effectExists, `${resource} is not in the ledger`);
    }
    const variants = new Set(succeeded.map((a) => a.variant));
    if (variants.size > 1) add(Invariant.ownArguments, 'callers with different arguments both got succeeded');
    const last = intent.answers.filter((a) => a.variant === 0).at(-1);
    if (!last || !settles(last))
      add(Invariant.settled, `last answer: ${last ? (last.outcome ?? last.failure) + (last.code ? ` ${last.code}` : '') : 'none'}`);
    // "Failed" (nothing ran, or refused) is a lie once the effect is on its way: after a succeeded answer, or after
    // the request that made the effect reached the downstream, even if it was applied only later (a request our
    // side gave up on, still processed): from then on the key's operation has happened.
    const firstSuccess = Math.min(...succeeded.map((a) => a.answeredAt));
    const requestAt = Math.min(...effects.map((e) => timeOf(e.received_at ?? e.created_at)));
    for (const a of intent.answers) {
      if (a.outcome === 'failed' && (a.sentAt > firstSuccess || a.sentAt > requestAt))
        add(Invariant.noFalseNothingRan, `${a.retryable ? 'retryable' : 'final'} ${a.code}: ${a.message?.slice(0, 100)}`);
    }
  }
  const anyExposed = intents.some((i) => i.exposed);
  const queuedEntries = [...ledger.emails, ...ledger.tickets].filter((e) => e.event_id && e.tenant?.startsWith('chaos-'));
  const counts = new Map<string, number>();
  for (const entry of queuedEntries) counts.set(entry.event_id!, (counts.get(entry.event_id!) ?? 0) + 1);
  for (const [eventId, n] of counts) {
    if (n > 1) violations.push({ kind: Invariant.eventOnce, detail: `event ${eventId}: ${n} effects`, exposed: anyExposed });
    // Queued effects that no succeeded answer names: delivered for a call the service does not know it made.
    if (!named.has(eventId)) violations.push({ kind: Invariant.effectAnswered, detail: `event ${eventId}`, exposed: anyExposed });
  }
  return violations;
}

/**
 * Reads a history file back: its `call` lines, the `intent` lines (whether an intent was exposed to an emulator
 * SIGKILL) and the `ledger` line the chaos run writes before checking.
 */
export function readHistory(text: string): { intents: HistoryIntent[]; ledger: Ledger } {
  const intents = new Map<number, HistoryIntent>();
  let ledger: Ledger | undefined;
  const intentOf = (line: Record<string, unknown>): HistoryIntent => {
    const id = Number(line.intent ?? line.id);
    let intent = intents.get(id);
    if (!intent) {
      intent = { id, tool: line.tool as WriteTool, tenant: String(line.tenant), key: String(line.key), exposed: false, answers: [] };
      intents.set(id, intent);
    }
    return intent;
  };
  for (const [n, raw] of text.split('\n').entries()) {
    if (!raw.trim()) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(raw);
    } catch {
      throw new Error(`history line ${n + 1} is not JSON`);
    }
    if (line.kind === 'call') {
      const sentAt = Date.parse(String(line.sent_at));
      intentOf(line).answers.push({
        outcome: line.outcome as string | undefined,
        retryable: line.retryable as boolean | undefined,
        code: line.code as string | undefined,
        message: line.message as string | undefined,
        resource: line.resource as string | undefined,
        failure: line.failure as string | undefined,
        variant: Number(line.variant ?? 0),
        sentAt,
        answeredAt: sentAt + Number(line.ms ?? 0),
      });
    } else if (line.kind === 'intent') {
      intentOf(line).exposed = line.exposed === true;
    } else if (line.kind === 'ledger') {
      ledger = line.ledger as Ledger;
    }
  }
  if (!ledger) throw new Error('the history has no ledger line: it was not written by a finished chaos run');
  return { intents: [...intents.values()].sort((a, b) => a.id - b.id), ledger };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: npx tsx test/models/history-check.ts <history.jsonl>');
    process.exit(2);
  }
  const violations = checkHistory(readHistory(readFileSync(file, 'utf8')));
  const counted = violations.filter((v) => !v.exposed);
  for (const v of violations) console.log(`${v.exposed ? '(exposed) ' : ''}${v.kind}: ${v.detail}`);
  console.log(counted.length ? `${counted.length} violation(s)` : 'no violation');
  process.exit(counted.length ? 1 : 0);
}
