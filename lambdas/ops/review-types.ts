import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Clock } from '../core/clock';
import {
  type IdempotencyRecord,
  type RecordState,
  type ReviewEntry,
  type StoredError,
  REVIEW_REASON_MAX_CHARS,
} from '../core/state-machine';
import type { ApprovalStore } from '../confirmation/approval-store';
import type { IdempotencyStore, OperatorDecision, RecordQueries, ReviewLog, ReviewStore } from '../engine/persistence';
import type { WriteToolDefinition } from '../mcp/tool-types';
import type { DeliveryView } from '../outbox/outbox-event';
import type { OutboxStore } from '../outbox/outbox-store';

/*
 * What the review desk (review.ts) is asked and answers: the filters of `list`, the views of `show`, the decisions a
 * person prepares and applies, and the refusal of bad input. The desk's commands (cli.ts) print these.
 */

/** Bad input: unknown key, malformed result, a wrong state for the action, a missing reason. Nothing was written. */
export class ReviewInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReviewInputError';
  }
}

/** The reason for the review log, trimmed; refused (nothing written) when missing or longer than a log entry may be. */
export function reviewReason(reason: string | undefined): string {
  const text = reason?.trim() ?? '';
  if (!text) throw new ReviewInputError('--reason is required: say why, for the review log');
  if (text.length > REVIEW_REASON_MAX_CHARS)
    throw new ReviewInputError(
      `--reason is ${text.length} characters; at most ${REVIEW_REASON_MAX_CHARS} (link a ticket or a document for more)`,
    );
  return text;
}

/** What `list` can be narrowed to: records by state, outbox events pending too long or given up on. */
export const LIST_STATUSES = ['needs_review', 'unknown', 'stale', 'pending', 'failed'] as const;
export type ListStatus = (typeof LIST_STATUSES)[number];

export interface ListFilter {
  status?: ListStatus;
  tenant?: string;
  tool?: string;
  /** Only entries at least this old (a pending outbox event counts from its commit). */
  olderThanMs?: number;
  /** Entries returned at most; `truncated` says whether more matched. */
  limit?: number;
}

export type AttentionEntry =
  | {
      kind: 'record';
      status: 'needs_review' | 'unknown' | 'stale';
      tenant: string;
      tool: string;
      idempotency_key: string;
      /** Since when it is in this state (a stale lease: since it passed). */
      since: string;
      age_seconds: number;
      attempts: number;
      error?: StoredError;
    }
  | {
      kind: 'outbox_event';
      status: 'pending' | 'failed';
      event_id: string;
      tenant: string;
      tool: string;
      /** The outbox keeps the key's hash only; `show` of the record names the event. */
      key_hash: string;
      since: string;
      age_seconds: number;
      sends: number;
      error?: StoredError;
    };

export interface ListResult {
  entries: AttentionEntry[];
  truncated: boolean;
}

export interface RecordView {
  tenant: string;
  tool: string;
  idempotency_key: string;
  /** ABSENT: no record (a decision released the key), only its review log remains. */
  status: RecordState;
  fingerprint?: string;
  created_at?: string;
  updated_at?: string;
  replay_until?: string;
  lease_expires_at?: string;
  next_check_at?: string;
  /**
   * UNKNOWN and NEEDS_REVIEW records: from when a downstream showing nothing proves the operation did not happen
   * (its in-flight window's end: before it, a request of it may still land).
   */
  decidable_at?: string;
  attempts?: number;
  error?: StoredError;
  error_type?: string;
  result?: unknown;
  delivery?: DeliveryView;
  review: Array<Omit<ReviewEntry, 'at'> & { at: string }>;
  /** The person's approval of the operation (tools with confirmation 'approval' or 'required'); absent when none was asked. */
  approval?: ApprovalView;
  /**
   * The tool needs a person's approval (or confirmation), yet this call ran with none for its arguments: the operator
   * opted the tool out for 2025-era clients (CONFIRMATION_OPT_OUT_TOOLS), so it ran on the agent's word alone.
   */
  ran_without?: 'approval' | 'confirmation';
}

/**
 * An operation's approval record as `show` prints it: what it is bound to, when it expires, and its log of who
 * asked and who decided, when. The decisions live in the approval record's own log (the same partition as the
 * idempotency record), not in the review log, which holds operators' transitions of the idempotency record.
 */
export interface ApprovalView {
  /** The current round's status. 'expired': still undecided past its expiry (the next call asks anew). */
  status: 'pending' | 'approved' | 'declined' | 'expired';
  /** How the current round was asked: 'url', on the approval page; 'form', in the MCP client's form. */
  mode: 'url' | 'form';
  /** The current round's number (1: the first). */
  round: number;
  tool: string;
  /** The fingerprint of the arguments the person was asked about. */
  fingerprint: string;
  summary: string;
  created_at: string;
  expires_at: string;
  /** The current round's decision, from its log entry: when, who, and how ('url': signed in on the page; 'form': the client's word). */
  decided_at?: string;
  decided_by?: string;
  decided_via?: 'url' | 'form';
  /** When a run used the current round's yes, and which run (the owner token of the record it claimed): a yes authorizes one run. */
  used_at?: string;
  used_by?: string;
  /** Every round's entries, oldest first. */
  log: Array<{
    at: string;
    round: number;
    /** 'used': a run used the round's yes (`by`: the run's id). */
    event: 'requested' | 'approved' | 'declined' | 'used';
    /** 'requested': how the person was asked; a decision: how it was made. */
    via?: 'url' | 'form';
    fingerprint?: string;
    /** 'requested': what the person was asked to approve. */
    summary?: string;
    /** The person's subject (url) or 'mcp-client' (form). */
    by?: string;
    /** The decider's tenant: the approval's own (the page lets only a person of that tenant decide). */
    tenant?: string;
  }>;
}

/** What a person asks for: settle (found with its result, or absent), or another check by the reconciler. */
export type OperatorAction = { kind: 'found'; result: unknown } | { kind: 'absent' } | { kind: 'recheck' };

/** A decision checked against the record as read; `apply` writes it fenced on that read. */
export interface PreparedDecision {
  record: IdempotencyRecord;
  log: ReviewLog;
  decision: OperatorDecision;
  entry: ReviewEntry;
}

export type DecisionOutcome =
  | { applied: true; before: RecordView; after: RecordView }
  /** The record changed between the read and the write (the reconciler, another person): nothing was written. */
  | { applied: false; read: RecordView; now: RecordView };

export interface RedriveResult {
  moved: Array<{ event_id: string; tenant: string; tool: string }>;
  /** Messages that are not outbox events: left in the dead-letter queue. */
  skipped: number;
}

export interface ReviewDeskOptions {
  /** The records, their review logs, and the queries that find what needs a look. */
  store: IdempotencyStore & ReviewStore & RecordQueries;
  outbox: OutboxStore;
  /** The write tools this deployment serves: result schemas and absence policies. */
  tools: ReadonlyMap<string, WriteToolDefinition>;
  /** The outbox queue and its dead-letter queue (redrive only). */
  queue?: { sqs: SQSClient; queueUrl?: string; deadLetterQueueUrl: () => Promise<string | undefined> };
  /** Where the operations' approvals are kept: `show` prints a key's approval. Default: none shown. */
  approvals?: ApprovalStore;
  /** Who decides: the caller's AWS identity, or the OS user locally. */
  who: () => Promise<string>;
  logger: Logger;
  clock?: Clock;
}
