import type { ApprovalRecord } from '../core/approval';
import type { ApprovalStore, DecideResult } from './approval-store';

type Binding = { tenant: string; tool: string; idempotencyKey: string };
const keyOf = (binding: Binding) => JSON.stringify([binding.tenant, binding.tool, binding.idempotencyKey]);
const copy = <T>(value: T): T => structuredClone(value);

/**
 * The approval store in one process's memory: tests, and a single-process server where losing the people's
 * decisions with the process is acceptable. Each method checks the condition the DynamoDB adapter's conditional
 * write checks (lambdas/store/dynamodb-approval-store.ts) and applies it whole or not at all; callers get copies.
 */
export class InMemoryApprovalStore implements ApprovalStore {
  private readonly approvals = new Map<string, ApprovalRecord>();

  async current(binding: Binding): Promise<ApprovalRecord | undefined> {
    const record = this.approvals.get(keyOf(binding));
    return record && copy(record);
  }

  async open(record: ApprovalRecord, replacing: string | undefined): Promise<ApprovalRecord> {
    const existing = this.approvals.get(keyOf(record));
    // Another call asked first: its approval is the one the person sees.
    if (existing && existing.nonce !== replacing) return copy(existing);
    this.approvals.set(keyOf(record), copy(record));
    return copy(record);
  }

  async decide(binding: Binding, nonce: string, decision: { status: 'approved' | 'declined'; by: string; at: number }): Promise<DecideResult> {
    const record = this.approvals.get(keyOf(binding));
    if (!record || record.nonce !== nonce) return { applied: false, reason: 'unknown' };
    if (record.status !== 'pending') return { applied: false, reason: 'decided', record: copy(record) };
    if (record.expiresAt <= decision.at) return { applied: false, reason: 'expired', record: copy(record) };
    const decided: ApprovalRecord = {
      ...record,
      status: decision.status,
      decidedAt: decision.at,
      decidedBy: decision.by,
      log: [...record.log, { at: decision.at, event: decision.status, by: decision.by }],
    };
    this.approvals.set(keyOf(binding), decided);
    return { applied: true, record: copy(decided) };
  }
}
