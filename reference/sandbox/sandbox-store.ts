import { randomBytes } from 'node:crypto';
import { DeleteCommand, GetCommand, paginateQuery, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Clock } from 'idempotent-mcp/engine';
import type { ReferenceConfig } from '../config';
import type { ArmedFault, FaultMode, FaultRequest, FaultTarget } from './faults';

/** DynamoDB refused a conditional write (the item was not as the condition asked). */
const isConditionRefusal = (err: unknown): boolean => (err as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException';

type Item = Record<string, unknown>;

/** What the sandbox reads of the endpoint's services: the service table (its orders) and the clock. */
export interface SandboxServices {
  doc: DynamoDBDocumentClient;
  tableName: string;
  clock: Clock;
}

export interface PaymentEntry {
  payment_id: string;
  tenant: string;
  idempotency_key: string;
  amount_minor: number;
  currency: string;
  payee_id: string;
  memo?: string;
  status: 'succeeded';
  /** SHA-256 of the request body: the same key with another body is refused. */
  request_hash: string;
  /** When the request arrived: before created_at (when it was applied) under the late-commit fault. */
  received_at?: string;
  created_at: string;
}

export interface TicketEntry {
  ticket_id: string;
  tenant: string;
  event_id?: string;
  title: string;
  description: string;
  priority: string;
  /** When the request arrived: before created_at (when it was applied) under the late-commit fault. */
  received_at?: string;
  created_at: string;
}

export interface EmailEntry {
  message_id: string;
  tenant: string;
  event_id?: string;
  from: string;
  to: string;
  subject: string;
  /** When the request arrived: before created_at (when it was applied) under the late-commit fault. */
  received_at?: string;
  created_at: string;
}

const Partition = {
  payments: 'LEDGER#payments',
  tickets: 'LEDGER#tickets',
  emails: 'LEDGER#emails',
  faults: 'FAULTS',
} as const;

/** Time-ordered, unique ids: `<prefix>_<ms base36>_<random>`. */
export function sandboxId(prefix: string, now: number): string {
  return `${prefix}_${now.toString(36)}_${randomBytes(6).toString('hex')}`;
}

const strip = <T>(item: Item): T => {
  const { pk: _pk, sk: _sk, ...rest } = item;
  return rest as T;
};

/**
 * The sandbox store when the sandbox is enabled. Opened where it is used (the sandbox routes, the relay's fault
 * injection), not in the shared services: the MCP function never touches it, so its bundle does not carry it.
 */
export function openSandboxStore(services: Pick<SandboxServices, 'doc'>, config: ReferenceConfig): SandboxStore | undefined {
  return config.sandboxEnabled ? new SandboxStore(services.doc, config.sandboxTableName) : undefined;
}

/**
 * The sandbox downstreams' state, in its own DynamoDB table: it survives a killed worker or server process, and
 * the same code runs deployed (behind the sandbox flag). Small partitions per ledger: a fixture, not a product.
 */
export class SandboxStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    readonly tableName: string,
  ) {}

  async armFault(fault: FaultRequest): Promise<ArmedFault> {
    const armed: ArmedFault = {
      target: fault.target,
      mode: fault.mode,
      remaining: fault.times,
      ...(fault.delay_ms === undefined ? {} : { delay_ms: fault.delay_ms }),
    };
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { pk: Partition.faults, sk: fault.target, ...armed } }));
    return armed;
  }

  async listFaults(): Promise<ArmedFault[]> {
    return (await this.query(Partition.faults)).map((item) => strip<ArmedFault>(item)).filter((f) => f.remaining > 0);
  }

  async clearFaults(): Promise<void> {
    const items = await this.query(Partition.faults);
    await Promise.all(
      items.map((item) => this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: { pk: item.pk, sk: item.sk } }))),
    );
  }

  /**
   * Takes one use of the armed fault for `target`, atomically across processes; undefined when none is armed, or
   * when the armed one is of a mode in `except` (left armed for the calls it applies to).
   */
  async takeFault(target: FaultTarget, options: { except?: readonly FaultMode[] } = {}): Promise<ArmedFault | undefined> {
    const except = options.except ?? [];
    const skipped = Object.fromEntries(except.map((mode, i) => [`:skip${i}`, mode]));
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: Partition.faults, sk: target },
          UpdateExpression: 'SET remaining = remaining - :one',
          ConditionExpression: `remaining > :zero${except.length ? ` AND NOT #mode IN (${Object.keys(skipped).join(', ')})` : ''}`,
          ...(except.length ? { ExpressionAttributeNames: { '#mode': 'mode' } } : {}),
          ExpressionAttributeValues: { ':one': 1, ':zero': 0, ...skipped },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return out.Attributes ? strip<ArmedFault>(out.Attributes) : undefined;
    } catch (err) {
      if (isConditionRefusal(err)) return undefined;
      throw err;
    }
  }

  /** Stores the payment under its idempotency key unless one exists; then returns the existing one. */
  async putPayment(payment: PaymentEntry): Promise<{ created: true } | { created: false; existing: PaymentEntry }> {
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { pk: Partition.payments, sk: `KEY#${payment.idempotency_key}`, ...payment },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return { created: true };
    } catch (err) {
      if (!isConditionRefusal(err)) throw err;
      const existing = await this.paymentByKey(payment.idempotency_key);
      if (!existing) throw err;
      return { created: false, existing };
    }
  }

  /**
   * Books the payment whatever its key already booked (a provider without deduplication, the `late-commit` fault):
   * under its key when that is free, so a lookup by key finds it, else as one more payment beside the first.
   */
  async bookPayment(payment: PaymentEntry): Promise<void> {
    const stored = await this.putPayment(payment);
    if (stored.created) return;
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: { pk: Partition.payments, sk: `AGAIN#${payment.idempotency_key}#${payment.payment_id}`, ...payment },
      }),
    );
  }

  async paymentByKey(idempotencyKey: string): Promise<PaymentEntry | undefined> {
    const { Item } = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: { pk: Partition.payments, sk: `KEY#${idempotencyKey}` }, ConsistentRead: true }),
    );
    return Item ? strip<PaymentEntry>(Item) : undefined;
  }

  async addTicket(ticket: TicketEntry): Promise<void> {
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { pk: Partition.tickets, sk: ticket.ticket_id, ...ticket } }));
  }

  async addEmail(email: EmailEntry): Promise<void> {
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { pk: Partition.emails, sk: email.message_id, ...email } }));
  }

  /** The ledger's view: without the request hash (an internal of the deduplication). */
  async payments(): Promise<Omit<PaymentEntry, 'request_hash'>[]> {
    return (await this.ledger<PaymentEntry>(Partition.payments)).map(({ request_hash: _hash, ...payment }) => payment);
  }

  async tickets(): Promise<TicketEntry[]> {
    return this.ledger<TicketEntry>(Partition.tickets);
  }

  async emails(): Promise<EmailEntry[]> {
    return this.ledger<EmailEntry>(Partition.emails);
  }

  private async ledger<T extends { created_at: string }>(partition: string): Promise<T[]> {
    return (await this.query(partition)).map((item) => strip<T>(item)).sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  private async query(partition: string): Promise<Item[]> {
    const items: Item[] = [];
    const pages = paginateQuery(
      { client: this.doc },
      {
        TableName: this.tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': partition },
        ConsistentRead: true,
      },
    );
    for await (const page of pages) items.push(...(page.Items ?? []));
    return items;
  }
}
