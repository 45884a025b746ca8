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

/**
 * What travels through the queue: everything the consumer needs, so it reads nothing but its claim.
 *
 * @public
 */
export interface OutboxMessage<P = Record<string, unknown>> {
  /** Unique per event: the consumer dedups deliveries by it; pass it to the downstream wherever it accepts a reference. */
  event_id: string;
  /** Which delivery handler performs the effect, e.g. `email.send`. */
  type: string;
  /** The tenant of the call that committed the event. */
  tenant: string;
  /** The tool that committed the event. */
  tool: string;
  /** A hash of the operation's key (the logs' `key_hash`): correlates log lines, never the key itself. */
  key_hash: string;
  /** What the delivery handler needs to perform the effect, as the tool queued it. */
  payload: P;
  /** When the tool committed the event (epoch ms): its delivery budget counts from it. */
  created_at: number;
  /**
   * Whose event it is on a shared table: the key prefix (TABLE_KEY_PREFIX) of the endpoint whose tool committed it;
   * absent for the unprefixed endpoint. Set from the stored event's key; a consumer delivers only its own.
   */
  key_prefix?: string;
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

class MalformedMessageError extends Error {
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
  if (m!.key_prefix !== undefined && typeof m!.key_prefix !== 'string') throw new MalformedMessageError('key_prefix not a string');
  return m as OutboxMessage;
}

/**
 * What `get_operation_status` shows about an outbox tool's effect.
 */
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

/**
 * An outbox event (as OutboxStore reads it) as get_operation_status shows it.
 */
export function toDeliveryView(event: {
  message: Pick<OutboxMessage, 'event_id'>;
  status: DeliveryStatus;
  sendCount: number;
  updatedAt: number;
  result?: unknown;
  error?: { code: string; message: string };
}): DeliveryView {
  return {
    event_id: event.message.event_id,
    status: event.status === 'PENDING' ? 'pending' : event.status === 'DELIVERED' ? 'delivered' : 'failed',
    ...(event.result !== undefined ? { result: event.result } : {}),
    ...(event.error ? { error: event.error } : {}),
    sends: event.sendCount,
    updated_at: new Date(event.updatedAt).toISOString(),
  };
}
