import type { ApprovalDecision, ApprovalRecord } from './core/approval';

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
   * Writes `record` (a new round: `newApproval` with `previous`) unless the approval changed since `previous` was
   * read (another round opened, or it was decided): then returns the approval that won, so concurrent calls share
   * one link and no entry of the log is lost.
   */
  open(record: ApprovalRecord, previous: ApprovalRecord | undefined): Promise<ApprovalRecord>;
  /**
   * Decides `record`'s round (as read) once: only while it is the current round, pending, unexpired, and asked the
   * way it is decided (`decision.via`). Appends the decision to the log (`decisionEntry`). The decision is made
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
   * no run. Appends the use to the log (`useEntry`). The engine calls it before the run claims the key, so whether a
   * yes was used survives the idempotency record (whose retention may be shorter than the link's lifetime).
   * `use.at`: epoch ms, when the run used the yes (before it claimed the key); `use.by`: the run, the owner token of
   * the idempotency record it claims (`ops show` prints it). Answers applied (the run may go on; the approval now
   * records it), or not: another run used the round first, or the round is no longer the approved one read (nothing
   * written either way).
   */
  use(
    record: ApprovalRecord,
    use: { at: number; by: string },
  ): Promise<{ applied: true; record: ApprovalRecord } | { applied: false; record: ApprovalRecord | undefined }>;
}

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
