import { DeleteMessageBatchCommand, ReceiveMessageCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type * as z from 'zod';
import { systemClock, type Clock } from '../core/clock';
import { ErrorCode } from '../core/errors';
import { hashForLog } from '../core/idempotency-key';
import { allows, transition, type IdempotencyRecord, type OperatorEvent, type ReviewEntry } from '../core/state-machine';
import { approvalState, currentDecision, FORM_CLIENT, type ApprovalLogEntry, type ApprovalRecord } from '../confirmation/core/approval';
import type { AttentionStatus, OperatorDecision, RecordIdentity, ReviewLog } from '../engine/persistence';
import type { WriteToolDefinition } from '../mcp/tool-types';
import { countForTool, MetricName } from '../observability/metrics';
import { parseOutboxMessage, toDeliveryView, type DeliveryView } from '../outbox/outbox-event';
import { OutboxDefaults } from '../core/outbox-budget';
import type { StoredOutboxEvent } from '../outbox/outbox-store';
import { leaseHasPassed } from '../core/lease';
import { absenceIsConclusive, decidableAt } from '../core/in-flight';
import { toolInFlightWindowMs } from '../core/tool-policy';
import {
  ReviewInputError,
  reviewReason,
  type ListStatus,
  type ListFilter,
  type AttentionEntry,
  type ListResult,
  type RecordView,
  type ApprovalView,
  type OperatorAction,
  type PreparedDecision,
  type DecisionOutcome,
  type RedriveResult,
  type ReviewDeskOptions,
} from './review-types';

const iso = (ms: number | undefined) => (ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString());

const PAGE_SIZE = 100;
const DEFAULT_LIST_LIMIT = 200;
/** SQS moves at most this many messages per request. */
const SQS_BATCH = 10;

const ACTION_EVENT = { found: 'operator_settled_found', recheck: 'operator_recheck' } as const;

/**
 * The review workflow for what the engine parks for a person: NEEDS_REVIEW and UNKNOWN records, stale leases,
 * outbox events that are not delivered. Reads go through the attention index (never a table scan); every decision is
 * one state transition (lambdas/core/state-machine.ts) written as one conditional write fenced on the record as read,
 * with an entry in the record's review log, logged and counted.
 */
export class ReviewDesk {
  private readonly clock: Clock;

  constructor(private readonly options: ReviewDeskOptions) {
    this.clock = options.clock ?? systemClock;
  }

  async list(filter: ListFilter = {}): Promise<ListResult> {
    this.options.store.assertQueryable('`ops list`');
    const limit = filter.limit ?? DEFAULT_LIST_LIMIT;
    const now = this.clock();
    const olderThan = filter.olderThanMs ?? 0;
    const entries: AttentionEntry[] = [];
    let truncated = false;
    const wanted = (status: ListStatus) => filter.status === undefined || filter.status === status;
    const matches = (e: AttentionEntry) =>
      (filter.tenant === undefined || e.tenant === filter.tenant) &&
      (filter.tool === undefined || e.tool === filter.tool) &&
      e.age_seconds * 1000 >= olderThan;

    const { store, outbox } = this.options;
    /** Each wanted listing, as pages of entries (undefined: read, but not one to show). */
    const sources: Array<() => AsyncIterable<Array<AttentionEntry | undefined>>> = [];
    const records = (status: AttentionStatus, dueBy?: number) =>
      async function* () {
        for await (const page of store.attentionPages(status, { pageSize: PAGE_SIZE, dueBy }))
          yield page.map((record) => recordEntry(record, now));
      };
    const events = (status: 'PENDING' | 'FAILED', minAgeMs: number) =>
      async function* () {
        for await (const page of outbox.eventPages(status, PAGE_SIZE)) yield page.map((event) => eventEntry(event, now, minAgeMs));
      };
    if (wanted('needs_review')) sources.push(records('NEEDS_REVIEW'));
    if (wanted('unknown')) sources.push(records('UNKNOWN'));
    // A lease is due at its expiry: live executions are not read at all.
    if (wanted('stale')) sources.push(records('PROCESSING', now));
    // A pending event is expected for a moment after its commit; by default one past its expected delivery is shown.
    const pendingAfter = filter.olderThanMs ?? OutboxDefaults.expectedDeliveryMs;
    if (wanted('pending')) sources.push(events('PENDING', pendingAfter));
    if (wanted('failed')) sources.push(events('FAILED', 0));

    for (const source of sources) {
      for await (const page of source()) {
        for (const entry of page) {
          if (!entry || !matches(entry)) continue;
          if (entries.length === limit) {
            truncated = true;
            break;
          }
          entries.push(entry);
        }
        if (truncated) break;
      }
      if (truncated) break;
    }
    entries.sort((a, b) => b.age_seconds - a.age_seconds);
    return { entries, truncated };
  }

  /**
   * The record (or, once released, its review log alone), its outbox delivery and its approval (a declined or
   * undecided approval leaves the key free: then the approval alone). Unknown key: ReviewInputError.
   */
  async show(identity: RecordIdentity): Promise<RecordView> {
    const [record, log, approval] = await Promise.all([
      this.options.store.get(identity),
      this.options.store.reviewLog(identity),
      this.options.approvals?.current(identity),
    ]);
    if (!record && log.entries.length === 0 && !approval) throw new ReviewInputError(`no record for ${describe(identity)}`);
    const view = this.view(identity, record, log);
    const delivery = await this.delivery(record);
    const confirmation = this.options.tools.get(identity.tool)?.confirmation ?? 'none';
    // Approved for the arguments that ran, in any round (entries older than rounds carry the record's fingerprint).
    const approved = approval?.log.some(
      (entry) => entry.event === 'approved' && (entry.fingerprint ?? approval.fingerprint) === record?.fingerprint,
    );
    const ranWithout =
      record && confirmation !== 'none' && !approved
        ? { ran_without: confirmation === 'approval' ? ('approval' as const) : ('confirmation' as const) }
        : {};
    return { ...view, ...(delivery ? { delivery } : {}), ...(approval ? { approval: this.approvalView(approval) } : {}), ...ranWithout };
  }

  /** Checks the action against the record as read now; throws ReviewInputError, with nothing written, when it does not apply. */
  async prepare(identity: RecordIdentity, action: OperatorAction, reason: string | undefined): Promise<PreparedDecision> {
    const why = reviewReason(reason);
    const [record, log] = await Promise.all([this.options.store.get(identity), this.options.store.reviewLog(identity)]);
    if (!record)
      throw new ReviewInputError(
        `no record for ${describe(identity)}${log.entries.length ? ' (already released by a review decision)' : ''}`,
      );
    const tool = this.options.tools.get(identity.tool);
    let decision: OperatorDecision;
    if (action.kind === 'found') {
      decision = { event: ACTION_EVENT.found, result: tool ? validateResult(tool, action.result) : action.result };
    } else if (action.kind === 'recheck') {
      if (tool && !tool.reconcile)
        throw new ReviewInputError(`${identity.tool} cannot be checked by the reconciler: settle it with --found or --absent`);
      decision = { event: ACTION_EVENT.recheck };
    } else {
      // What an absence means is the tool's call; without the tool, releasing the key could run the operation twice.
      if (!tool)
        throw new ReviewInputError(
          `unknown tool ${identity.tool}: its absence policy (release or fail) is not known here (pass the endpoint's tools module: --tools <module>)`,
        );
      // A downstream showing nothing while a request of the operation may still land proves nothing.
      const decidable = this.decidable(record);
      if (!absenceIsConclusive(decidable, this.clock())) {
        throw new ReviewInputError(
          `a request of this operation may still land until ${iso(decidable)}: a downstream showing nothing before then proves nothing; check it again after that time (or settle --found if it shows the effect)`,
        );
      }
      decision =
        tool.onAbsent === 'fail'
          ? {
              event: 'operator_settled_absent_fail',
              error: {
                code: ErrorCode.NOT_EXECUTED,
                message: 'A person confirmed the operation did not happen; it will not be run again with this key.',
              },
            }
          : { event: 'operator_settled_absent' };
    }
    if (!allows(record.status, decision.event)) {
      throw new ReviewInputError(
        `${describe(identity)} is ${record.status}: ${verb(decision.event)} applies to UNKNOWN or NEEDS_REVIEW records only`,
      );
    }
    const entry: ReviewEntry = {
      by: await this.options.who(),
      at: this.clock(),
      action: decision.event,
      reason: why,
      from: record.status,
      to: transition(record.status, decision.event),
    };
    return { record, log, decision, entry };
  }

  /** One conditional write fenced on the read in `prepare`: applied, or nothing written and the record as it is now. */
  async apply(prepared: PreparedDecision): Promise<DecisionOutcome> {
    const { store, logger } = this.options;
    const { record, log, decision, entry } = prepared;
    const before = this.view(record, record, log);
    const applied = await store.decide(record, log, decision, entry, this.clock());
    const [current, currentLog] = await Promise.all([store.get(record), store.reviewLog(record)]);
    const now = this.view(record, current, currentLog);
    const fields = {
      tool: record.tool,
      tenant: record.tenant,
      key_hash: hashForLog(record.idempotencyKey),
      action: entry.action,
      by: entry.by,
      from: entry.from,
    };
    if (!applied) {
      countForTool(MetricName.ReviewRaces, record.tool);
      logger.warn('review decision not written: the record changed meanwhile', { ...fields, status_now: now.status });
      return { applied: false, read: before, now };
    }
    countForTool(MetricName.ReviewDecisions, record.tool);
    logger.info('review decision applied', { ...fields, to: entry.to, reason: entry.reason });
    return { applied: true, before, after: now };
  }

  async decide(identity: RecordIdentity, action: OperatorAction, reason: string | undefined): Promise<DecisionOutcome> {
    return this.apply(await this.prepare(identity, action, reason));
  }

  /**
   * Moves dead-letter messages back to the outbox queue: sent first, then deleted from the dead-letter queue, so a
   * failure in between leaves a copy in both, which is harmless (the consumer deduplicates by event id).
   */
  async redrive(max: number): Promise<RedriveResult> {
    const { queue, logger } = this.options;
    const deadLetterQueueUrl = await queue?.deadLetterQueueUrl();
    if (!queue?.queueUrl || !deadLetterQueueUrl)
      throw new ReviewInputError('redrive needs the outbox queue and its dead-letter queue (--queue, --stack, or a running npm start)');
    const { sqs, queueUrl } = queue;
    const result: RedriveResult = { moved: [], skipped: 0 };
    const seen = new Set<string>();
    while (result.moved.length < max) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: deadLetterQueueUrl,
          MaxNumberOfMessages: Math.min(SQS_BATCH, max - result.moved.length),
          WaitTimeSeconds: 0,
          // Hidden while this run works; a skipped one shows again afterwards.
          VisibilityTimeout: 60,
        }),
      );
      const fresh = Messages.filter((m) => m.MessageId && !seen.has(m.MessageId));
      if (fresh.length === 0) break;
      const events: Array<{ id: string; body: string; receipt: string; message: ReturnType<typeof parseOutboxMessage> }> = [];
      for (const m of fresh) {
        seen.add(m.MessageId!);
        try {
          events.push({
            id: String(events.length),
            body: m.Body ?? '',
            receipt: m.ReceiptHandle ?? '',
            message: parseOutboxMessage(m.Body ?? ''),
          });
        } catch {
          result.skipped++;
          logger.warn('dead-letter message is not an outbox event; left in place', { message_id: m.MessageId });
        }
      }
      if (events.length === 0) continue;
      const sent = await sqs.send(
        new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: events.map((e) => ({ Id: e.id, MessageBody: e.body })) }),
      );
      const ok = new Set((sent.Successful ?? []).map((s) => s.Id));
      const moved = events.filter((e) => ok.has(e.id));
      if (moved.length > 0) {
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: deadLetterQueueUrl,
            Entries: moved.map((e) => ({ Id: e.id, ReceiptHandle: e.receipt })),
          }),
        );
      }
      for (const e of moved) {
        const { event_id, tenant, tool, key_hash } = e.message;
        result.moved.push({ event_id, tenant, tool });
        countForTool(MetricName.Redriven, tool);
        logger.info('dead-letter message redriven to the outbox queue', { event_id, tenant, tool, key_hash, by: await this.options.who() });
      }
      if (moved.length < events.length)
        throw new Error(`the outbox queue refused ${events.length - moved.length} message(s); they stay in the dead-letter queue`);
    }
    return result;
  }

  private approvalView(approval: ApprovalRecord): ApprovalView {
    const status = approvalState(approval, approval.fingerprint, this.clock());
    // Who decided and how: from the decision's own log entry, never from how the round was asked.
    const decision = currentDecision(approval);
    // Entries written before decisions recorded `via`: the MCP client's answers carry FORM_CLIENT as who.
    const viaOf = (entry: ApprovalLogEntry) => entry.via ?? (entry.event !== 'requested' && entry.by === FORM_CLIENT ? 'form' : undefined);
    return {
      status: status === 'other' ? approval.status : status,
      mode: approval.mode,
      round: approval.round ?? 1,
      tool: approval.tool,
      fingerprint: approval.fingerprint,
      summary: approval.summary,
      created_at: iso(approval.createdAt)!,
      expires_at: iso(approval.expiresAt)!,
      ...(decision
        ? { decided_at: iso(decision.at), decided_by: decision.by, ...(viaOf(decision) ? { decided_via: viaOf(decision) } : {}) }
        : {}),
      ...(approval.usedAt !== undefined ? { used_at: iso(approval.usedAt), used_by: approval.usedBy } : {}),
      log: approval.log.map((entry) => ({
        at: iso(entry.at)!,
        round: entry.round ?? 1,
        event: entry.event,
        ...(viaOf(entry) !== undefined ? { via: viaOf(entry) } : {}),
        ...(entry.fingerprint !== undefined ? { fingerprint: entry.fingerprint } : {}),
        ...(entry.summary !== undefined ? { summary: entry.summary } : {}),
        ...(entry.by !== undefined ? { by: entry.by } : {}),
        ...(entry.event === 'approved' || entry.event === 'declined' ? { tenant: approval.tenant } : {}),
      })),
    };
  }

  private async delivery(record: IdempotencyRecord | undefined): Promise<DeliveryView | undefined> {
    const eventId = (record?.result as { event_id?: unknown } | undefined)?.event_id;
    if (typeof eventId !== 'string') return undefined;
    const event = await this.options.outbox.getEvent(eventId);
    return event ? toDeliveryView(event) : undefined;
  }

  /** When an absence of `record`'s effect becomes conclusive: its stored window's end (or, for an older record, its tool's window from its lease). */
  private decidable(record: IdempotencyRecord): number {
    const tool = this.options.tools.get(record.tool);
    return decidableAt(record, tool ? toolInFlightWindowMs(tool.idempotency, undefined, tool.effect) : toolInFlightWindowMs({}));
  }

  private view(identity: RecordIdentity, record: IdempotencyRecord | undefined, log: ReviewLog): RecordView {
    const review = log.entries.map((e) => ({ ...e, at: iso(e.at)! }));
    const base = { tenant: identity.tenant, tool: identity.tool, idempotency_key: identity.idempotencyKey };
    if (!record) return { ...base, status: 'ABSENT', review };
    return {
      ...base,
      status: record.status,
      fingerprint: record.fingerprint,
      created_at: iso(record.createdAt),
      updated_at: iso(record.updatedAt),
      replay_until: record.status === 'SUCCEEDED' || record.status === 'FAILED' ? iso(record.retainUntil) : undefined,
      lease_expires_at: record.status === 'PROCESSING' ? iso(record.leaseExpiresAt) : undefined,
      next_check_at: iso(record.nextCheckAt),
      decidable_at: record.status === 'UNKNOWN' || record.status === 'NEEDS_REVIEW' ? iso(this.decidable(record)) : undefined,
      attempts: record.reconcileAttempts ?? 0,
      error: record.error,
      error_type: record.errorType,
      result: record.result,
      review,
    };
  }
}

/** A record the store found needing a look, as `list` shows it; undefined for a lease that has not passed (yet). */
function recordEntry(record: IdempotencyRecord, now: number): AttentionEntry | undefined {
  const { status } = record;
  if (status === 'PROCESSING' && !leaseHasPassed(record.leaseExpiresAt, now)) return undefined;
  const since = status === 'PROCESSING' ? record.leaseExpiresAt : record.updatedAt;
  return {
    kind: 'record',
    status: status === 'PROCESSING' ? 'stale' : status === 'UNKNOWN' ? 'unknown' : 'needs_review',
    tenant: record.tenant,
    tool: record.tool,
    idempotency_key: record.idempotencyKey,
    since: iso(since)!,
    age_seconds: Math.max(0, Math.floor((now - since) / 1000)),
    attempts: record.reconcileAttempts ?? 0,
    ...(record.error ? { error: record.error } : {}),
  };
}

/** An outbox event found pending or given up on, as `list` shows it; undefined for one younger than `minAgeMs`. */
function eventEntry(event: StoredOutboxEvent, now: number, minAgeMs: number): AttentionEntry | undefined {
  const status = event.status === 'PENDING' ? 'PENDING' : 'FAILED';
  const since = status === 'PENDING' ? event.message.created_at : event.updatedAt;
  if (now - since < minAgeMs) return undefined;
  return {
    kind: 'outbox_event',
    status: status === 'PENDING' ? 'pending' : 'failed',
    event_id: event.message.event_id,
    tenant: event.message.tenant,
    tool: event.message.tool,
    key_hash: event.message.key_hash,
    since: iso(since)!,
    age_seconds: Math.max(0, Math.floor((now - since) / 1000)),
    sends: event.sendCount,
    ...(event.error ? { error: event.error } : {}),
  };
}

/** The tool's own result schema (what a replay returns), from its declared output. */
function validateResult(tool: WriteToolDefinition, result: unknown): unknown {
  const schema = (tool.outputSchema.shape as Record<string, z.ZodType>).result;
  const parsed = schema?.safeParse(result);
  if (!parsed || result === undefined || result === null)
    throw new ReviewInputError(`--result must be ${tool.name}'s result (a JSON object)`);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ReviewInputError(
      `--result is not a ${tool.name} result: ${issue?.path.join('.') || 'value'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return parsed.data;
}

const describe = (id: RecordIdentity) => `${id.tenant} ${id.tool} ${id.idempotencyKey}`;

function verb(event: OperatorEvent): string {
  return event === 'operator_recheck' ? 'recheck' : 'settle';
}
