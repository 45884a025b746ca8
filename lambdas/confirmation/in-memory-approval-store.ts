import type { ApprovalRecord } from './core/approval';
import { type ApprovalStore, decisionEntry, decisionRefused, usable, useEntry } from './approval-store';
import type { RecordIdentity } from '../engine/persistence';

const keyOf = (binding: RecordIdentity) => JSON.stringify([binding.tenant, binding.tool, binding.idempotencyKey]);
const copy = <T>(value: T): T => structuredClone(value);

/**
 * The approval store in one process's memory: tests, and a single-process server where losing the people's
 * decisions with the process is acceptable. Each method checks the condition the DynamoDB adapter's conditional
 * write checks (lambdas/store/dynamodb-approval-store.ts) and applies it whole or not at all; callers get copies.
 * @public
 */
export class InMemoryApprovalStore implements ApprovalStore {
  private readonly approvals = new Map<string, ApprovalRecord>();

  /** {@inheritDoc ApprovalStore.current} */
  async current(binding: RecordIdentity): Promise<ApprovalRecord | undefined> {
    const record = this.approvals.get(keyOf(binding));
    return record && copy(record);
  }

  /** {@inheritDoc ApprovalStore.open} */
  async open(record: ApprovalRecord, previous: ApprovalRecord | undefined): Promise<ApprovalRecord> {
    const now = this.approvals.get(keyOf(record));
    // Written only over the approval as read (none, or the same round in the same state, used or not): else the one that won.
    const asRead =
      previous === undefined
        ? now === undefined
        : now !== undefined && now.nonce === previous.nonce && now.status === previous.status && now.usedAt === previous.usedAt;
    if (!asRead) {
      if (!now) throw new Error('the approval read before this round was opened is gone');
      return copy(now);
    }
    this.approvals.set(keyOf(record), copy(record));
    return copy(record);
  }

  /** {@inheritDoc ApprovalStore.decide} */
  async decide(record: ApprovalRecord, decision: Parameters<ApprovalStore['decide']>[1]): ReturnType<ApprovalStore['decide']> {
    const now = this.approvals.get(keyOf(record));
    const refused = decisionRefused(now && copy(now), record.nonce, decision);
    if (refused) return refused;
    const decided: ApprovalRecord = {
      ...now!,
      status: decision.status,
      decidedAt: decision.at,
      decidedBy: decision.by,
      log: [...now!.log, decisionEntry(now!, decision)],
    };
    this.approvals.set(keyOf(record), decided);
    return { applied: true, record: copy(decided) };
  }

  /** {@inheritDoc ApprovalStore.use} */
  async use(record: ApprovalRecord, use: Parameters<ApprovalStore['use']>[1]): ReturnType<ApprovalStore['use']> {
    const now = this.approvals.get(keyOf(record));
    if (!usable(now, record.nonce)) return { applied: false, record: now && copy(now) };
    const used: ApprovalRecord = { ...now, usedAt: use.at, usedBy: use.by, log: [...now.log, useEntry(now, use)] };
    this.approvals.set(keyOf(record), used);
    return { applied: true, record: copy(used) };
  }
}
