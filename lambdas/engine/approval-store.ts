import type { ApprovalRecord } from '../core/approval';

/** The answer of `decide`: applied, or why not (nothing written). */
export type DecideResult =
  | { applied: true; record: ApprovalRecord }
  /** Already decided (by this person in another tab, by a replayed POST, by another person): the first decision stands. */
  | { applied: false; reason: 'decided'; record: ApprovalRecord }
  /** Past its expiry: the next call of the agent asks anew. */
  | { applied: false; reason: 'expired'; record: ApprovalRecord }
  /** No such approval, or replaced by a newer one (the link is stale). */
  | { applied: false; reason: 'unknown' };

/**
 * Where approvals live (port; lambdas/store/dynamodb-approval-store.ts is the DynamoDB adapter). Each method is one
 * read or one conditional write, so two people (or one person's two tabs, or a replayed POST) deciding at once
 * leave exactly one decision.
 */
export interface ApprovalStore {
  /** The binding's current approval, whatever its state. */
  current(binding: { tenant: string; tool: string; idempotencyKey: string }): Promise<ApprovalRecord | undefined>;
  /**
   * Writes `record` as the binding's current approval unless another one was written since `replacing` (the nonce
   * read, or undefined when there was none): then returns the approval that won, so concurrent calls share one link.
   */
  open(record: ApprovalRecord, replacing: string | undefined): Promise<ApprovalRecord>;
  /** Decides a pending, unexpired approval named by its nonce, once. */
  decide(
    binding: { tenant: string; tool: string; idempotencyKey: string },
    nonce: string,
    decision: { status: 'approved' | 'declined'; by: string; at: number },
  ): Promise<DecideResult>;
}
