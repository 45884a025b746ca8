import { unmarshall } from '@aws-sdk/util-dynamodb';
import { OwnershipLostError, TerminalToolError } from '../core/errors';
import type { StoredError } from '../core/state-machine';
import type { ExtraWrite } from '../engine/persistence';
import { attentionPages, countAttention, queryAttention } from '../store/attention-index';
import { claimByCondition, leasePassedClause } from '../store/conditional-claim';
import { DeleteCommand, GetCommand, TransactWriteCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { cancellationReasons, isConditionRefusal, type Item } from '../store/refusals';
import { deliveryKeyOf, isOutboxEventItemOf, outboxEventKeyOf } from '../store/record-item';
import { attentionPk, TableSchema } from '../store/table-schema';
import type { DeliveryStatus, OutboxMessage } from './outbox-event';
import { OutboxDefaults } from '../core/outbox-budget';

/**
 * A pending (or settled) outbox event as stored.
 */
export interface StoredOutboxEvent {
  message: OutboxMessage;
  status: DeliveryStatus;
  sendCount: number;
  /** Sends the queue refused (not counted in sendCount: nothing reached the queue). */
  refusedCount: number;
  /** When the sweep should next look at it (epoch ms); absent once settled. */
  attentionAt?: number;
  updatedAt: number;
  result?: unknown;
  error?: StoredError;
}

/**
 * The state of an event's delivery marker.
 */
type MarkerState = 'CLAIMED' | 'DELIVERED' | 'FAILED';

/**
 * The consumer's claim on one event: a lease held by one owner while the effect runs, then the final state.
 */
export interface DeliveryMarker {
  state: MarkerState;
  owner: string;
  leaseUntil: number;
  attempts: number;
  /**
   * The last moment a delivery request for this event may have been sent (the lease end of the last owner that may
   * have sent one, or the moment it stopped waiting for its answer; 0: none was sent). With the handler's in-flight
   * window it says when a lookup finding nothing is conclusive. Absent on claims written before it was kept.
   */
  lastSendBy?: number;
}

/**
 * What claiming an event's delivery answers: claimed (with an unsettled earlier claim, if any), or the marker that holds it.
 */
export type DeliveryClaim =
  /** `previous`: an earlier claim that never settled (a crashed or uncertain attempt): the effect may exist. */
  { claimed: true; previous?: DeliveryMarker } | { claimed: false; existing: DeliveryMarker };

const ttl = (now: number) => Math.floor(now / 1000) + OutboxDefaults.retentionSeconds;

function itemToEvent(item: Item): StoredOutboxEvent {
  // Whose it is, from its key: what precedes `OUTBOX#<id>` (nothing: the unprefixed store's).
  const keyPrefix = String(item.pk).slice(0, -outboxEventKeyOf(String(item.event_id)).pk.length);
  return {
    message: {
      event_id: item.event_id as string,
      type: item.event_type as string,
      tenant: item.tenant as string,
      tool: item.tool as string,
      key_hash: item.key_hash as string,
      payload: item.payload as Record<string, unknown>,
      created_at: Number(item.created_at),
      ...(keyPrefix ? { key_prefix: keyPrefix } : {}),
    },
    status: item.status as DeliveryStatus,
    sendCount: Number(item.send_count ?? 0),
    refusedCount: Number(item.refused_count ?? 0),
    attentionAt: item.attention_at === undefined ? undefined : Number(item.attention_at),
    updatedAt: Number(item.updated_at),
    result: item.delivery_result ?? undefined,
    error: (item.error as StoredError | null) ?? undefined,
  };
}

function itemToMarker(item: Item): DeliveryMarker {
  return {
    state: item.state as MarkerState,
    owner: item.owner as string,
    leaseUntil: Number(item.lease_until),
    attempts: Number(item.attempts ?? 0),
    ...(item.last_send_by === undefined ? {} : { lastSendBy: Number(item.last_send_by) }),
  };
}

const OWNED_CLAIM = '#state = :claimed AND #owner = :owner';

/**
 * The outbox's DynamoDB adapter: events (`OUTBOX#<id>` / `EVENT`) and the consumer's delivery claims
 * (`OUTBOX#<id>` / `DELIVERY`), one conditional request per step. With a `keyPrefix` (the endpoint's
 * TABLE_KEY_PREFIX) its keys and attention partitions carry it, as the records' do: on a shared table each endpoint's
 * relay sends, and its consumer delivers, only its own events.
 */
export class OutboxStore {
  /** Whose events these are on a shared table (`DynamoDbIdempotencyStore`'s `keyPrefix`). Default none. */
  readonly keyPrefix: string;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    readonly tableName: string,
    /** `enabled: false` on an endpoint without an outbox (OUTBOX=off): eventWrite refuses. Default true. */
    private readonly options: { enabled?: boolean; keyPrefix?: string } = {},
  ) {
    this.keyPrefix = options.keyPrefix ?? '';
  }

  /** Whether a message (from the queue) is one of this store's events: its consumer delivers no other. */
  owns(message: Pick<OutboxMessage, 'key_prefix'>): boolean {
    return (message.key_prefix ?? '') === this.keyPrefix;
  }

  /**
   * The event as a write in the tool's completion transaction: it exists if and only if the SUCCEEDED record does.
   * Pending events carry the attention index key, due at once: the relay (or the sweep) sends them.
   */
  eventWrite(message: OutboxMessage): ExtraWrite {
    // Refused before anything commits: an event nobody delivers would stay pending, the call reported as queued.
    if (this.options.enabled === false) {
      throw new TerminalToolError(
        'OUTBOX_DISABLED',
        `This endpoint has no outbox, so ${message.tool} cannot queue a '${message.type}' event: deploy it with a deliveries module that delivers that type (IdempotentMcpEndpoint's deliveries).`,
      );
    }
    const key = outboxEventKeyOf(message.event_id, this.keyPrefix);
    // Created, never overwritten: a colliding id cancels the whole transaction rather than replace someone else's event.
    return {
      create: {
        key,
        item: {
          event_id: message.event_id,
          event_type: message.type,
          tenant: message.tenant,
          tool: message.tool,
          key_hash: message.key_hash,
          payload: message.payload,
          created_at: message.created_at,
          updated_at: message.created_at,
          status: 'PENDING',
          send_count: 0,
          [TableSchema.attentionIndex.partitionKey]: attentionPk('OUTBOX', key.pk, this.keyPrefix),
          [TableSchema.attentionIndex.sortKey]: message.created_at,
          [TableSchema.ttlAttribute]: ttl(message.created_at),
        },
      },
    };
  }

  /** Reads a stream image or an index item the same way as a table item; undefined unless it is one of our events. */
  eventFromItem(item: Record<string, unknown>): StoredOutboxEvent | undefined {
    return isOutboxEventItemOf(item, this.keyPrefix) && typeof item.event_id === 'string' ? itemToEvent(item) : undefined;
  }

  /** A DynamoDB Streams image (attribute values typed, as the relay's event source delivers them). */
  eventFromImage(image: Record<string, unknown>): StoredOutboxEvent | undefined {
    return this.eventFromItem(unmarshall(image as Parameters<typeof unmarshall>[0]));
  }

  async getEvent(eventId: string): Promise<StoredOutboxEvent | undefined> {
    const { Item } = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: outboxEventKeyOf(eventId, this.keyPrefix), ConsistentRead: true }),
    );
    return Item ? itemToEvent(Item) : undefined;
  }

  async getMarker(eventId: string): Promise<DeliveryMarker | undefined> {
    const item = await this.markerItem(eventId);
    return item ? itemToMarker(item) : undefined;
  }

  private async markerItem(eventId: string): Promise<Item | undefined> {
    const { Item } = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: deliveryKeyOf(eventId, this.keyPrefix), ConsistentRead: true }),
    );
    return Item;
  }

  /** Pending events whose next look is due, oldest first. */
  async dueEvents(dueBy: number, limit: number): Promise<StoredOutboxEvent[]> {
    const items = await queryAttention(this.doc, this.tableName, 'OUTBOX', { dueBy, limit, scope: this.keyPrefix });
    return items.map((item) => this.eventFromItem(item)).filter((e): e is StoredOutboxEvent => e?.status === 'PENDING');
  }

  /** How many events are pending (the reconciler's gauge): a COUNT per index shard, no event read back. */
  pendingCount(): Promise<number> {
    return countAttention(this.doc, this.tableName, 'OUTBOX', this.keyPrefix);
  }

  /**
   * Every event still pending, or given up on (FAILED: until a redrive delivers it), a page at a time, in no set
   * order across pages: the review desk's listing, which filters as it goes.
   */
  async *eventPages(status: 'PENDING' | 'FAILED', pageSize: number): AsyncIterable<StoredOutboxEvent[]> {
    for await (const page of attentionPages(
      this.doc,
      this.tableName,
      status === 'PENDING' ? 'OUTBOX' : 'UNDELIVERED',
      pageSize,
      undefined,
      this.keyPrefix,
    )) {
      yield page.map((item) => this.eventFromItem(item)).filter((event): event is StoredOutboxEvent => event?.status === status);
    }
  }

  /** After a send: count it and schedule the sweep's next look. False when the event settled meanwhile. */
  async recordSend(eventId: string, nextLookAt: number, now: number): Promise<boolean> {
    return this.updatePending(eventId, 'send_count = if_not_exists(send_count, :zero) + :one, attention_at = :next, last_sent_at = :now', {
      ':zero': 0,
      ':one': 1,
      ':next': nextLookAt,
      ':now': now,
    });
  }

  /** After the queue refused it: count the refusal and schedule the sweep's next try. False when it settled meanwhile. */
  async recordRefusal(eventId: string, nextLookAt: number): Promise<boolean> {
    return this.updatePending(eventId, 'refused_count = if_not_exists(refused_count, :zero) + :one, attention_at = :next', {
      ':zero': 0,
      ':one': 1,
      ':next': nextLookAt,
    });
  }

  /**
   * The consumer tries the event again at about `nextLookAt` (its message kept on the queue until then): the sweep
   * leaves it alone until that look is due, and only then re-sends it (its message was lost: a local restart, say).
   * False when it settled meanwhile.
   */
  async scheduleLook(eventId: string, nextLookAt: number): Promise<boolean> {
    return this.updatePending(eventId, 'attention_at = :next', { ':next': nextLookAt });
  }
  /** One conditional SET on an event still PENDING; false when it settled meanwhile. */
  private updatePending(eventId: string, set: string, values: Record<string, unknown>): Promise<boolean> {
    return this.conditional(() =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: outboxEventKeyOf(eventId, this.keyPrefix),
          UpdateExpression: `SET ${set}`,
          ConditionExpression: '#status = :pending',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ...values, ':pending': 'PENDING' },
        }),
      ),
    );
  }

  /** A pending event that will not be delivered (sweep gave up, or its message went to the DLQ). */
  async failEvent(eventId: string, error: StoredError, now: number): Promise<boolean> {
    return this.conditional(() =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: outboxEventKeyOf(eventId, this.keyPrefix),
          // Out of the sweep's partition, into the one `npm run ops -- list` reads (a delivery removes it from both).
          UpdateExpression: 'SET #status = :failed, #error = :error, updated_at = :now, attention_pk = :undelivered, attention_at = :now',
          ConditionExpression: '#status = :pending',
          ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
          ExpressionAttributeValues: {
            ':failed': 'FAILED',
            ':error': error,
            ':now': now,
            ':pending': 'PENDING',
            ':undelivered': attentionPk('UNDELIVERED', outboxEventKeyOf(eventId, this.keyPrefix).pk, this.keyPrefix),
          },
        }),
      ),
    );
  }

  /**
   * The consumer's dedup claim, written before the effect. It succeeds on a new event, or on a claim whose lease
   * passed without a settlement (its holder crashed or could not tell whether the effect happened); it fails on a
   * live claim (a duplicate delivery while the first is working) and on a settled one. The claim's lease is also
   * the last moment its owner may send a delivery request (`lastSendBy`), kept in the same write.
   */
  async claimDelivery(eventId: string, owner: string, leaseUntil: number, now: number): Promise<DeliveryClaim> {
    const key = deliveryKeyOf(eventId, this.keyPrefix);
    const claim = await claimByCondition(
      this.doc,
      {
        update: {
          TableName: this.tableName,
          Key: key,
          UpdateExpression:
            'SET #state = :claimed, #owner = :owner, lease_until = :lease, last_send_by = :lease, claimed_at = :now, attempts = if_not_exists(attempts, :zero) + :one, #ttl = :ttl',
          ConditionExpression: `attribute_not_exists(pk) OR (#state = :claimed AND ${leasePassedClause('lease_until')})`,
          ExpressionAttributeNames: { '#state': 'state', '#owner': 'owner', '#ttl': TableSchema.ttlAttribute },
          ExpressionAttributeValues: {
            ':claimed': 'CLAIMED',
            ':owner': owner,
            ':lease': leaseUntil,
            ':now': now,
            ':zero': 0,
            ':one': 1,
            ':ttl': ttl(now),
          },
        },
      },
      () => this.markerItem(eventId),
    );
    if (!claim.claimed) return { claimed: false, existing: itemToMarker(claim.existing) };
    return { claimed: true, previous: claim.previous ? itemToMarker(claim.previous) : undefined };
  }

  /**
   * Settles our claim and the event in one transaction, so a status look-up never sees one without the other.
   * Throws OwnershipLostError when our lease was taken over (the new holder verifies and settles instead).
   */
  async settleDelivery(
    eventId: string,
    owner: string,
    outcome: { state: 'DELIVERED'; result: unknown } | { state: 'FAILED'; error: StoredError },
    now: number,
  ): Promise<void> {
    const status: DeliveryStatus = outcome.state;
    const result = outcome.state === 'DELIVERED' ? (outcome.result ?? null) : null;
    const error = outcome.state === 'FAILED' ? outcome.error : null;
    try {
      await this.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Update: {
                TableName: this.tableName,
                Key: deliveryKeyOf(eventId, this.keyPrefix),
                UpdateExpression: 'SET #state = :state, settled_at = :now, delivery_result = :result, #error = :error',
                ConditionExpression: OWNED_CLAIM,
                ExpressionAttributeNames: { '#state': 'state', '#owner': 'owner', '#error': 'error' },
                ExpressionAttributeValues: {
                  ':state': outcome.state,
                  ':now': now,
                  ':result': result,
                  ':error': error,
                  ':claimed': 'CLAIMED',
                  ':owner': owner,
                },
              },
            },
            {
              // Unconditional on the event's status: the effect is what happened, even after the sweep gave up on it.
              Update: {
                TableName: this.tableName,
                Key: outboxEventKeyOf(eventId, this.keyPrefix),
                UpdateExpression:
                  'SET #status = :status, updated_at = :now, delivery_result = :result, #error = :error REMOVE attention_pk, attention_at',
                ConditionExpression: 'attribute_exists(pk)',
                ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
                ExpressionAttributeValues: { ':status': status, ':now': now, ':result': result, ':error': error },
              },
            },
          ],
        }),
      );
    } catch (err) {
      if (cancellationReasons(err)?.[0]?.Code === 'ConditionalCheckFailed') {
        throw new OwnershipLostError();
      }
      throw err;
    }
  }

  /** Gives our claim up: the effect is known not to have happened, so the next delivery runs it. */
  async releaseDelivery(eventId: string, owner: string): Promise<boolean> {
    return this.conditional(() =>
      this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: deliveryKeyOf(eventId, this.keyPrefix),
          ConditionExpression: OWNED_CLAIM,
          ExpressionAttributeNames: { '#state': 'state', '#owner': 'owner' },
          ExpressionAttributeValues: { ':claimed': 'CLAIMED', ':owner': owner },
        }),
      ),
    );
  }

  /**
   * Keeps our claim, unsettled, until `leaseUntil`: the effect may have happened, so whoever takes it over next
   * verifies with the downstream first. `lastSendBy`: the last moment a delivery request may have been sent, now
   * that we know whether we sent one (the claim wrote our lease's end there).
   */
  async deferDelivery(
    eventId: string,
    owner: string,
    deferral: { leaseUntil: number; lastSendBy: number; error: StoredError },
  ): Promise<boolean> {
    return this.conditional(() =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: deliveryKeyOf(eventId, this.keyPrefix),
          UpdateExpression: 'SET lease_until = :lease, last_send_by = :sent, #error = :error',
          ConditionExpression: OWNED_CLAIM,
          ExpressionAttributeNames: { '#state': 'state', '#owner': 'owner', '#error': 'error' },
          ExpressionAttributeValues: {
            ':lease': deferral.leaseUntil,
            ':sent': deferral.lastSendBy,
            ':error': deferral.error,
            ':claimed': 'CLAIMED',
            ':owner': owner,
          },
        }),
      ),
    );
  }

  private async conditional(send: () => Promise<unknown>): Promise<boolean> {
    try {
      await send();
      return true;
    } catch (err) {
      if (isConditionRefusal(err)) return false;
      throw err;
    }
  }
}
