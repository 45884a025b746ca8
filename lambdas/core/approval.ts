import { randomBytes } from 'node:crypto';
import type { ConfirmationBinding } from './confirmation-state';
import type { ItemKey } from './keys';
import { Keys } from './keys';

/**
 * A person's approval of one operation (tool `confirmation: 'approval'`, or the form-mode decision record): bound to
 * tenant, tool, key and the arguments' fingerprint, expiring, decided once. It lives next to the idempotency record
 * (same partition), so what the person decided, who and when, stays with the operation it was about.
 *
 * The approval's id, the link's last segment, is `<binding>.<nonce>`: the binding names the item, the random nonce
 * names this one approval of it, so a link replaced by a newer approval (after expiry or a decline) no longer works.
 */
export type ApprovalStatus = 'pending' | 'approved' | 'declined';
export type ApprovalMode = 'url' | 'form';

export interface ApprovalLogEntry {
  /** Epoch ms. */
  at: number;
  event: 'requested' | 'approved' | 'declined';
  /** Who: the signed-in person's subject (url mode) or 'mcp-client' (form mode, the client's word). */
  by?: string;
}

export interface ApprovalRecord extends ConfirmationBinding {
  /** `<binding>.<nonce>`: what the page's link names. */
  id: string;
  nonce: string;
  mode: ApprovalMode;
  /** What the person approves, one line (lambdas/core/display-text.ts). */
  summary: string;
  status: ApprovalStatus;
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms: a pending approval cannot be decided after this, and is replaced by a new one on the next call. */
  expiresAt: number;
  decidedAt?: number;
  /** The person's subject (the page) or 'mcp-client' (form mode). */
  decidedBy?: string;
  log: ApprovalLogEntry[];
  /** The MCP 2026-07-28 `requestState` the approval was asked under: a retry before the decision gets it again. */
  requestState?: string;
}

/** Long enough to sign in and read; short enough that a forgotten link cannot be approved days later. */
export const DEFAULT_APPROVAL_TTL_SECONDS = 900;
/** The longest an approval link may live: a day. */
export const MAX_APPROVAL_TTL_SECONDS = 86_400;

const NONCE = /^[A-Za-z0-9_-]{22}$/;

export const approvalKey = (binding: Pick<ConfirmationBinding, 'tenant' | 'tool' | 'idempotencyKey'>): ItemKey => ({
  pk: Keys.idempotency(binding.tenant, binding.tool, binding.idempotencyKey).pk,
  sk: 'APPROVAL',
});

export function approvalId(binding: Pick<ConfirmationBinding, 'tenant' | 'tool' | 'idempotencyKey'>, nonce: string): string {
  return `${Buffer.from(JSON.stringify([binding.tenant, binding.tool, binding.idempotencyKey])).toString('base64url')}.${nonce}`;
}

/** The binding and nonce an approval id names, or undefined for anything that is not one. */
export function parseApprovalId(id: string): { tenant: string; tool: string; idempotencyKey: string; nonce: string } | undefined {
  const match = /^([A-Za-z0-9_-]{1,1400})\.([A-Za-z0-9_-]{22})$/.exec(id);
  if (!match) return undefined;
  try {
    const parts = JSON.parse(Buffer.from(match[1]!, 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(parts) || parts.length !== 3 || !parts.every((part) => typeof part === 'string' && part.length > 0 && !part.includes('#'))) return undefined;
    const [tenant, tool, idempotencyKey] = parts as [string, string, string];
    return { tenant, tool, idempotencyKey, nonce: match[2]! };
  } catch {
    return undefined;
  }
}

export function newApproval(
  binding: ConfirmationBinding,
  options: { mode: ApprovalMode; summary: string; now: number; ttlSeconds?: number; nonce?: string; requestState?: string },
): ApprovalRecord {
  const nonce = options.nonce ?? randomBytes(16).toString('base64url');
  return {
    ...binding,
    id: approvalId(binding, nonce),
    nonce,
    mode: options.mode,
    summary: options.summary,
    status: 'pending',
    createdAt: options.now,
    expiresAt: options.now + (options.ttlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS) * 1000,
    log: [{ at: options.now, event: 'requested' }],
    ...(options.requestState ? { requestState: options.requestState } : {}),
  };
}

export const isNonce = (value: unknown): value is string => typeof value === 'string' && NONCE.test(value);

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
