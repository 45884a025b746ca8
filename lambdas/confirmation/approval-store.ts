import { type ApprovalLogEntry, type ApprovalRecord, MAX_DECIDER_CHARS } from './core/approval';

/** The answer of `ApprovalStore.decide`. */
export type DecideResult = Awaited<ReturnType<ApprovalStore['decide']>>;

/**
 * Where approvals live (port; lambdas/store/dynamodb-approval-store.ts is the DynamoDB adapter). Each method is one
 * read or one conditional write, so two people (or one person's two tabs, or a replayed POST) deciding at once
 * leave exactly one decision, and two calls opening a round at once leave one round: no log entry is ever lost.
 * @public
 */
export interface ApprovalStore {
  /** The binding's current round, with the log of every round, whatever its state. */
  current(binding: { tenant: string; tool: string; idempotencyKey: string }): Promise<ApprovalRecord | undefined>;
  /**
   * Writes `record` (the round after `previous`, built by the toolkit) unless the approval changed since `previous` was
   * read (another round opened, or it was decided): then returns the approval that won, so concurrent calls share
   * one link and no entry of the log is lost.
   */
  open(record: ApprovalRecord, previous: ApprovalRecord | undefined): Promise<ApprovalRecord>;
  /**
   * Decides `record`'s round (as read) once: only while it is the current round, pending, unexpired, and asked the
   * way it is decided (`decision.via`). Appends the decision to the log: `at`, `event` (its status), `via` and `by` of
   * the decision (`by` cut to 256 characters), `round` and `fingerprint` of the round. The decision is made
   * `via` the page or a form, as the log records it. Answers applied, or why not (nothing written).
   */
  decide(
    record: ApprovalRecord,
    decision: { status: 'approved' | 'declined'; by: string; at: number; via: ApprovalRecord['mode'] },
  ): Promise<
    | { applied: true; record: ApprovalRecord }
    /** Already decided (by this person in another tab, by a replayed POST, by another person): the first decision stands. */
    | { applied: false; reason: 'decided'; record: ApprovalRecord }
    /** Past its expiry: the next call of the agent asks anew. */
    | { applied: false; reason: 'expired'; record: ApprovalRecord }
    /** Asked the other way (on the page, or in the client's form): it is decided only the way it was asked. */
    | { applied: false; reason: 'mode'; record: ApprovalRecord }
    /** No such approval, or replaced by a newer round (the link is stale). */
    | { applied: false; reason: 'unknown' }
  >;
  /**
   * Records that a run uses `record`'s yes (as read), once: only while it is the current round, approved and used by
   * no run. Appends the use to the log: `at` and `by` of the use (`by` cut to 256 characters), `event` 'used', and
   * `round`, `via` (the round's mode) and `fingerprint` of the round. The engine calls it before the run claims the
   * key, so whether a yes was used survives the idempotency record (whose retention may be shorter than the link's
   * lifetime).
   * Answers applied (the run may go on; the approval now records it), or not: another run used the round first, or
   * the round is no longer the approved one read (nothing written either way).
   */
  use(
    record: ApprovalRecord,
    use: {
      /** Epoch ms: when the run used the yes (before it claimed the key). */
      at: number;
      /** The run: the owner token of the idempotency record it claims (`ops show` prints it). */
      by: string;
    },
  ): Promise<{ applied: true; record: ApprovalRecord } | { applied: false; record: ApprovalRecord | undefined }>;
}

/** A decision of a round, made `via` the page or a form, as its log records it (`ApprovalStore.decide`'s). */
export type ApprovalDecision = Parameters<ApprovalStore['decide']>[1];

/** A run's use of an approved round (`ApprovalStore.use`'s). */
type ApprovalUse = Parameters<ApprovalStore['use']>[1];

/** The log entry of a run's use of `record`'s round. */
export const useEntry = (record: Pick<ApprovalRecord, 'round' | 'fingerprint' | 'mode'>, use: ApprovalUse): ApprovalLogEntry => ({
  at: use.at,
  event: 'used',
  round: record.round,
  via: record.mode,
  fingerprint: record.fingerprint,
  by: use.by.slice(0, MAX_DECIDER_CHARS),
});

/** The log entry of a decision of `record`'s round. */
export const decisionEntry = (record: Pick<ApprovalRecord, 'round' | 'fingerprint'>, decision: ApprovalDecision): ApprovalLogEntry => ({
  at: decision.at,
  event: decision.status,
  round: record.round,
  via: decision.via,
  fingerprint: record.fingerprint,
  by: decision.by.slice(0, MAX_DECIDER_CHARS),
});

/** Whether `use` of round `nonce` can be written on the approval as it is now: the rule of every store's conditional write. */
export const usable = (now: ApprovalRecord | undefined, nonce: string): now is ApprovalRecord =>
  now !== undefined && now.nonce === nonce && now.status === 'approved' && now.usedAt === undefined;

/**
 * Why `decision` of round `nonce` cannot be written on the approval as it is now, or undefined when it can: the rule
 * every store's conditional write applies (current round, pending, asked the way it is decided, unexpired).
 */
export function decisionRefused(
  now: ApprovalRecord | undefined,
  nonce: string,
  decision: ApprovalDecision,
): Exclude<DecideResult, { applied: true }> | undefined {
  if (!now || now.nonce !== nonce) return { applied: false, reason: 'unknown' };
  if (now.status !== 'pending') return { applied: false, reason: 'decided', record: now };
  if (now.mode !== decision.via) return { applied: false, reason: 'mode', record: now };
  if (decision.at >= now.expiresAt) return { applied: false, reason: 'expired', record: now };
  return undefined;
}
