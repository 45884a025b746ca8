import { randomBytes } from 'node:crypto';
import type { ConfirmationBinding } from './round-state';
import { Keys } from '../../core/keys';
import { withinLogBounds } from '../../core/state-machine';

/** Where a round stands (`ApprovalRecord['status']`). */
export type ApprovalStatus = ApprovalRecord['status'];
/** How a round is asked and decided (`ApprovalRecord['mode']`). */
export type ApprovalMode = ApprovalRecord['mode'];

/** What the client of a form-mode round is recorded as (stored as 'mcp-client'): its answer is the client's word, not a signed-in person's. */
export const FORM_CLIENT = 'mcp-client';

/** One event of an approval's history (`ApprovalRecord['log']`). */
export type ApprovalLogEntry = ApprovalRecord['log'][number];

/**
 * One operation's approval as the approval store keeps it: the call it binds, its round, its decision and history.
 *
 * A person's approval of one operation (tool `confirmation: 'approval'`, or the form-mode decision record): bound to
 * tenant, tool, key and the arguments' fingerprint, expiring, decided once. It lives next to the idempotency record
 * (same partition), so what the person decided, who and when, stays with the operation it was about.
 *
 * One operation may be asked more than once (after an expiry, a decline, or for other arguments): each ask is a
 * round. The record holds the current round, and a log of every round, append-only: a new round never erases an
 * earlier decision.
 *
 * The approval's id, the link's last segment, is `<binding>.<nonce>`: the binding names the item, the random nonce
 * names this one round of it, so a link replaced by a newer round no longer works.
 * @public
 */
export interface ApprovalRecord extends ConfirmationBinding {
  /** `<binding>.<nonce>`: what the page's link names. */
  id: string;
  /** Random, one per round: the id's last part, so a link replaced by a newer round no longer works. */
  nonce: string;
  /**
   * How the round is asked and decided: 'url', on the approval page by a signed-in person of the tenant; 'form', in
   * the MCP client's form (the client's word). A round is decided only the way it was asked.
   */
  mode: 'url' | 'form';
  /** What the person approves, one line (lambdas/core/display-text.ts). */
  summary: string;
  /** Where the round stands: pending until the person decides, then approved or declined, once. */
  status: 'pending' | 'approved' | 'declined';
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms: a pending approval cannot be decided after this, and is replaced by a new one on the next call. */
  expiresAt: number;
  /** Epoch ms of the person's yes or no; absent while pending. */
  decidedAt?: number;
  /** The person's subject (the page) or 'mcp-client' (form mode). */
  decidedBy?: string;
  /**
   * Epoch ms: when a run of the operation used this round's yes (`ApprovalStore.use`). A yes authorizes one run: once
   * set, the next call with the key asks the person anew. Kept on the approval, not read from the idempotency record,
   * because that record's retention may end (and TTL delete it) long before the approval's own item does.
   */
  usedAt?: number;
  /** The run that used it: the owner token of the idempotency record it claimed (`ops show` prints both). */
  usedBy?: string;
  /** This round's number: 1 for the operation's first. */
  round: number;
  /**
   * Every round's entries, oldest first, append-only (bounded: a round opens only while the log has room for its
   * request, decision and use; a full log takes no new round): each event of the approval's history
   * (requested, approved, declined, used).
   */
  log: {
    /** Epoch ms. */
    at: number;
    event: 'requested' | 'approved' | 'declined' | 'used';
    /** Which round (1, 2, ...) of the operation's approval. */
    round: number;
    /** 'requested': how the person is asked; a decision: how it was made (never inferred from the record's mode). */
    via: 'url' | 'form';
    /** The fingerprint of the arguments the round is about. */
    fingerprint: string;
    /** 'requested': what the person is asked to approve (the decision entries are about the same round's). */
    summary?: string;
    /** A decision's who: the signed-in person's subject (url) or 'mcp-client' (form); 'used': the run's id. */
    by?: string;
  }[];
  /** The MCP 2026-07-28 `requestState` the approval was asked under: a retry before the decision gets it again. */
  requestState?: string;
}

/**
 * Long enough to sign in and read; short enough that a forgotten link cannot be approved days later.
 */
export const DEFAULT_APPROVAL_TTL_SECONDS = 900;
/**
 * The longest an approval link may live: a day.
 */
export const MAX_APPROVAL_TTL_SECONDS = 86_400;

export const approvalKey = (binding: Pick<ConfirmationBinding, 'tenant' | 'tool' | 'idempotencyKey'>) => ({
  pk: Keys.idempotency(binding.tenant, binding.tool, binding.idempotencyKey).pk,
  sk: 'APPROVAL',
});

/** @public */
export function approvalId(binding: Pick<ConfirmationBinding, 'tenant' | 'tool' | 'idempotencyKey'>, nonce: string): string {
  return `${Buffer.from(JSON.stringify([binding.tenant, binding.tool, binding.idempotencyKey])).toString('base64url')}.${nonce}`;
}

/**
 * The binding and nonce an approval id names, or undefined for anything that is not one.
 */
export function parseApprovalId(id: string): { tenant: string; tool: string; idempotencyKey: string; nonce: string } | undefined {
  const match = /^([A-Za-z0-9_-]{1,1400})\.([A-Za-z0-9_-]{22})$/.exec(id);
  if (!match) return undefined;
  try {
    const parts = JSON.parse(Buffer.from(match[1]!, 'base64url').toString('utf8')) as unknown;
    if (
      !Array.isArray(parts) ||
      parts.length !== 3 ||
      !parts.every((part) => typeof part === 'string' && part.length > 0 && !part.includes('#'))
    )
      return undefined;
    const [tenant, tool, idempotencyKey] = parts as [string, string, string];
    return { tenant, tool, idempotencyKey, nonce: match[2]! };
  } catch {
    return undefined;
  }
}

/**
 * Whether the log has room for another round (its request and its decision) within the bounds every log here keeps
 * (the review log's: lambdas/core/state-machine.ts). The review log drops its oldest entries; an approval log may
 * not (a decision is never erased), so a full log takes no new round: the operation is asked under a new key.
 */
function canOpenRound(previous: Pick<ApprovalRecord, 'log'> | undefined, next: ApprovalLogEntry): boolean {
  const decision: ApprovalLogEntry = { ...next, event: 'approved', by: 'x'.repeat(MAX_DECIDER_CHARS), summary: undefined };
  const use: ApprovalLogEntry = { ...decision, event: 'used' };
  return withinLogBounds([...(previous?.log ?? []), next, decision, use]);
}

/** The longest `by` a decision records (a subject claim is an opaque id, seldom over a hundred characters). */
export const MAX_DECIDER_CHARS = 256;

/**
 * The next round of the operation's approval after `previous` (none: the first), pending, with its request appended
 * to the log that every earlier round left. Undefined when the log has no room for another round (`canOpenRound`).
 */
export function newApproval(
  binding: ConfirmationBinding,
  options: {
    mode: ApprovalMode;
    summary: string;
    now: number;
    ttlSeconds?: number;
    nonce?: string;
    requestState?: string;
    previous?: ApprovalRecord;
  },
): ApprovalRecord | undefined {
  const nonce = options.nonce ?? randomBytes(16).toString('base64url');
  const round = (options.previous?.round ?? 0) + 1;
  const requested: ApprovalLogEntry = {
    at: options.now,
    event: 'requested',
    round,
    via: options.mode,
    fingerprint: binding.fingerprint,
    summary: options.summary,
  };
  if (!canOpenRound(options.previous, requested)) return undefined;
  return {
    ...binding,
    id: approvalId(binding, nonce),
    nonce,
    mode: options.mode,
    summary: options.summary,
    status: 'pending',
    createdAt: options.now,
    expiresAt: options.now + (options.ttlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS) * 1000,
    round,
    log: [...(options.previous?.log ?? []), requested],
    ...(options.requestState ? { requestState: options.requestState } : {}),
  };
}

/** The entry that decided `record`'s current round, if it is decided: who and how, as logged. */
export const currentDecision = (record: Pick<ApprovalRecord, 'round' | 'log'>): ApprovalLogEntry | undefined =>
  // A record written before rounds were numbered has one round, and entries without `round`.
  record.log.findLast((entry) => (entry.round ?? 1) === (record.round ?? 1) && (entry.event === 'approved' || entry.event === 'declined'));

/**
 * What an approval means for the call that asks about it now:
 * - 'approved' / 'declined': decided, and final for this approval;
 * - 'pending': the person has not decided, and still can;
 * - 'expired': undecided and too late: the next call asks anew;
 * - 'other': for other arguments under the same key (the engine answers that call as a conflict or runs it anew).
 */
export function approvalState(record: ApprovalRecord, fingerprint: string, now: number): ApprovalStatus | 'expired' | 'other' {
  if (record.fingerprint !== fingerprint) return 'other';
  if (record.status !== 'pending') return record.status;
  return now >= record.expiresAt ? 'expired' : 'pending';
}

/**
 * Whether a run may use `record`'s yes now: approved, not used by any run yet (an approval authorizes one run), and
 * within the link's lifetime after the decision (a yes nobody used for that long is asked again, which is safe).
 * The store's conditional write (`ApprovalStore.use`) makes the first use the only one.
 */
export function approvalUsable(
  record: Pick<ApprovalRecord, 'status' | 'decidedAt' | 'usedAt' | 'createdAt' | 'expiresAt'>,
  now: number,
): boolean {
  if (record.status !== 'approved' || record.usedAt !== undefined || record.decidedAt === undefined) return false;
  return now < record.decidedAt + (record.expiresAt - record.createdAt);
}
