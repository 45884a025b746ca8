import { hashForLog } from '../core/idempotency-key';

/**
 * The transactional outbox. A tool whose downstream cannot deduplicate (email, tickets) does not call it: it commits
 * an event in the same transaction as its SUCCEEDED record, and the relay, the queue and the consumer deliver it
 * exactly once to the effect.
 *
 *   PENDING --consumer delivered--> DELIVERED
 *          \--consumer: terminal error, or last receive failed with nothing done (message in the DLQ)--> FAILED
 *          (a last receive whose outcome is unknown leaves it PENDING: the sweep re-sends it and the consumer verifies)
 *          \--sweep: sent too often without delivery--> FAILED
 */
export type DeliveryStatus = 'PENDING' | 'DELIVERED' | 'FAILED';

/** What travels through the queue: everything the consumer needs, so it reads nothing but its claim. */
export interface OutboxMessage<P = Record<string, unknown>> {
  event_id: string;
  /** Which delivery handler performs the effect, e.g. `email.send`. */
  type: string;
  tenant: string;
  tool: string;
  /** `hashForLog` of the operation's key: correlates log lines, never the key itself. */
  key_hash: string;
  payload: P;
  created_at: number;
}

export function newOutboxMessage<P extends Record<string, unknown>>(input: {
  eventId: string;
  type: string;
  tenant: string;
  tool: string;
  idempotencyKey: string;
  payload: P;
  now: number;
}): OutboxMessage<P> {
  return {
    event_id: input.eventId,
    type: input.type,
    tenant: input.tenant,
    tool: input.tool,
    key_hash: hashForLog(input.idempotencyKey),
    payload: input.payload,
    created_at: input.now,
  };
}

export class MalformedMessageError extends Error {
  constructor(detail: string) {
    super(`malformed outbox message: ${detail}`);
    this.name = 'MalformedMessageError';
  }
}

export function parseOutboxMessage(body: string): OutboxMessage {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw new MalformedMessageError('not JSON');
  }
  const m = value as Partial<OutboxMessage> | null;
  for (const field of ['event_id', 'type', 'tenant', 'tool', 'key_hash'] as const) {
    if (typeof m?.[field] !== 'string' || !m[field]) throw new MalformedMessageError(`${field} missing`);
  }
  if (typeof m!.payload !== 'object' || m!.payload === null) throw new MalformedMessageError('payload missing');
  return m as OutboxMessage;
}

/** What `get_operation_status` shows about an outbox tool's effect. */
export interface DeliveryView {
  event_id: string;
  status: 'pending' | 'delivered' | 'failed';
  /** The downstream's answer once delivered (a ticket id, a message id). */
  result?: unknown;
  error?: { code: string; message: string };
  /** How often the event was put on the queue. */
  sends: number;
  updated_at: string;
}

/** Tuning shared by the relay, the consumer, the local queue and the CDK stack (they must agree). */
export const OutboxDefaults = {
  /** The sweep looks again at a sent but undelivered event after this long, doubling each time. */
  redeliverAfterMs: 60_000,
  redeliverMaxBackoffMs: 60 * 60_000,
  /** After this many sends without a delivery the sweep gives up: FAILED, logged and counted. */
  maxSends: 8,
  /** Events and delivery claims are kept this long for status look-ups and duplicate detection. */
  retentionSeconds: 14 * 24 * 3600,
  /** How long a delivery the downstream keeps refusing is retried, from the event's commit (OUTBOX_DELIVERY_BUDGET_SECONDS). */
  deliveryBudgetSeconds: 24 * 3600,
  /** The longest a budget may be: the queue keeps a message at most 14 days, and must outlive the budget. */
  maxDeliveryBudgetSeconds: 13 * 24 * 3600,
  /** First wait before a delivery is tried again, doubling per receive. */
  retryBaseMs: 1000,
  /** The longest wait between two tries: SQS extends a message's visibility by at most 12 hours at a time. */
  maxRetryDelayMs: 12 * 3600_000,
} as const;

/** Receives beyond the schedule: the last try clipped to the budget's end, a settlement retried, a duplicate's wait. */
const RECEIVE_MARGIN = 3;

/**
 * The receives one message can take while its delivery budget lasts: every retry waits at least
 * `baseMs * 2^(receive - 1)` (capped at the longest visibility), so the count is bounded by the budget. The queue's
 * redrive count must be at least this, or SQS would dead-letter a message whose budget still allows another try.
 */
export function receivesWithinBudget(budgetMs: number, baseMs: number = OutboxDefaults.retryBaseMs): number {
  const base = Math.max(1, baseMs);
  let receives = 1;
  for (let waited = 0; waited < budgetMs; receives++) waited += Math.min(base * 2 ** (receives - 1), OutboxDefaults.maxRetryDelayMs);
  return receives + RECEIVE_MARGIN;
}
