import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { DynamoDbServiceError, type DynamoDbOperation, type DynamoDbTransport, type WireBody } from './dynamodb-transport';

/** An item, a key or expression values with plain JavaScript values (what a document client reads and writes). */
export type Item = Record<string, unknown>;
/** What a request may carry as an item or a key: any plain object (a typed key such as `{ pk, sk }` too). */
export type ItemInput = object;

interface Expressions {
  ConditionExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Item;
}
type ReturnOld = 'NONE' | 'ALL_OLD';
/** `ALL_OLD` on a refused conditional write: the item that refused it comes back with the refusal. */
interface OnRefusal {
  ReturnValuesOnConditionCheckFailure?: ReturnOld;
}

export interface GetInput {
  TableName: string;
  Key: ItemInput;
  ConsistentRead?: boolean;
}
export interface PutInput extends Expressions, OnRefusal {
  TableName: string;
  Item: ItemInput;
  ReturnValues?: ReturnOld;
}
export interface UpdateInput extends Expressions, OnRefusal {
  TableName: string;
  Key: ItemInput;
  UpdateExpression: string;
  ReturnValues?: ReturnOld | 'ALL_NEW' | 'UPDATED_OLD' | 'UPDATED_NEW';
}
export interface DeleteInput extends Expressions, OnRefusal {
  TableName: string;
  Key: ItemInput;
  ReturnValues?: ReturnOld;
}
export interface ConditionCheckInput extends Expressions, OnRefusal {
  TableName: string;
  Key: ItemInput;
  ConditionExpression: string;
}
export type TransactWriteItem =
  | { Put: Omit<PutInput, 'ReturnValues'> }
  | { Update: Omit<UpdateInput, 'ReturnValues'> }
  | { Delete: Omit<DeleteInput, 'ReturnValues'> }
  | { ConditionCheck: ConditionCheckInput };
export interface TransactWriteInput {
  TransactItems: TransactWriteItem[];
  /** Makes a retried transaction idempotent for ten minutes; the transports fill in a random one when absent. */
  ClientRequestToken?: string;
}
export interface QueryInput {
  TableName: string;
  IndexName?: string;
  KeyConditionExpression: string;
  FilterExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Item;
  ExclusiveStartKey?: ItemInput;
  Limit?: number;
  ScanIndexForward?: boolean;
  ConsistentRead?: boolean;
  /** `COUNT`: only `Count` comes back, no items. */
  Select?: 'ALL_ATTRIBUTES' | 'COUNT';
}
export interface ScanInput {
  TableName: string;
  FilterExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Item;
  ExclusiveStartKey?: ItemInput;
  Limit?: number;
  ConsistentRead?: boolean;
}
export interface Page {
  Items: Item[];
  Count: number;
  LastEvaluatedKey?: Item;
}

/** A conditional write was refused; `Item` is the refusing item when the write asked for it (ALL_OLD). */
export class ConditionalCheckFailedError extends Error {
  override readonly name = 'ConditionalCheckFailedException';
  constructor(
    message: string,
    readonly Item?: Item,
  ) {
    super(message);
  }
}

/** One reason per action of a cancelled transaction, in order: `None`, `ConditionalCheckFailed`, `TransactionConflict`, ... */
export interface CancellationReason {
  Code?: string;
  Message?: string;
  /** The action's item, when its condition failed and it asked for ALL_OLD. */
  Item?: Item;
}

export class TransactionCanceledError extends Error {
  override readonly name = 'TransactionCanceledException';
  constructor(
    message: string,
    readonly CancellationReasons: CancellationReason[],
  ) {
    super(message);
  }
}

/** How values are written: `undefined` attributes are left out, class instances refused (as the adapters always did). */
const MARSHALL = { removeUndefinedValues: true, convertClassInstanceToMap: false } as const;

const toWire = (item: ItemInput): WireBody => marshall(item, MARSHALL) as WireBody;
const fromWire = (item: unknown): Item => unmarshall(item as Parameters<typeof unmarshall>[0]);
const optional = <T, R>(value: T | undefined, convert: (value: T) => R): R | undefined => (value === undefined ? undefined : convert(value));

function expressionsToWire<T extends { ExpressionAttributeValues?: Item }>(input: T): WireBody {
  const { ExpressionAttributeValues, ...rest } = input;
  return ExpressionAttributeValues === undefined ? rest : { ...rest, ExpressionAttributeValues: toWire(ExpressionAttributeValues) };
}

function writeToWire(input: { Key?: ItemInput; Item?: ItemInput; ExpressionAttributeValues?: Item }): WireBody {
  const wire = expressionsToWire(input);
  if (input.Key) wire.Key = toWire(input.Key);
  if (input.Item) wire.Item = toWire(input.Item);
  return wire;
}

/**
 * DynamoDB with plain JavaScript values, over any transport: what every adapter of this package (the idempotency
 * store, the outbox, the reconciler's work list, the tools' own writes) uses. Marshalling is the AWS SDK's own
 * (`@aws-sdk/util-dynamodb`), with the options the adapters need. A refused conditional write rejects with
 * ConditionalCheckFailedError, a cancelled transaction with TransactionCanceledError, their items unmarshalled.
 */
export class DocumentClient {
  constructor(readonly transport: DynamoDbTransport) {}

  async get(input: GetInput): Promise<{ Item?: Item }> {
    const out = await this.send('GetItem', { ...input, Key: toWire(input.Key) });
    return { Item: optional(out.Item, fromWire) };
  }

  async put(input: PutInput): Promise<{ Attributes?: Item }> {
    const out = await this.send('PutItem', writeToWire(input));
    return { Attributes: optional(out.Attributes, fromWire) };
  }

  async update(input: UpdateInput): Promise<{ Attributes?: Item }> {
    const out = await this.send('UpdateItem', writeToWire(input));
    return { Attributes: optional(out.Attributes, fromWire) };
  }

  async delete(input: DeleteInput): Promise<{ Attributes?: Item }> {
    const out = await this.send('DeleteItem', writeToWire(input));
    return { Attributes: optional(out.Attributes, fromWire) };
  }

  async transactWrite(input: TransactWriteInput): Promise<void> {
    const TransactItems = input.TransactItems.map((action) =>
      Object.fromEntries(Object.entries(action).map(([kind, write]) => [kind, writeToWire(write as Parameters<typeof writeToWire>[0])])),
    );
    await this.send('TransactWriteItems', { ...input, TransactItems });
  }

  async query(input: QueryInput): Promise<Page> {
    return this.page('Query', input);
  }

  async scan(input: ScanInput): Promise<Page> {
    return this.page('Scan', input);
  }

  /** Every page a query finds (`Limit` items per page at most), until the last. */
  queryPages(input: QueryInput): AsyncGenerator<Page> {
    return this.pages('Query', input);
  }

  /** Every page a scan finds (`Limit` items per page at most), until the last. */
  scanPages(input: ScanInput): AsyncGenerator<Page> {
    return this.pages('Scan', input);
  }

  /** An operation in DynamoDB's own JSON (table management in the local setup, for instance). */
  call(operation: DynamoDbOperation, input: WireBody): Promise<WireBody> {
    return this.transport.call(operation, input);
  }

  destroy(): void {
    this.transport.destroy();
  }

  private async *pages(operation: 'Query' | 'Scan', input: QueryInput | ScanInput): AsyncGenerator<Page> {
    let start = input.ExclusiveStartKey;
    do {
      const page = await this.page(operation, { ...input, ExclusiveStartKey: start });
      yield page;
      start = page.LastEvaluatedKey;
    } while (start);
  }

  private async page(operation: 'Query' | 'Scan', input: QueryInput | ScanInput): Promise<Page> {
    const wire = expressionsToWire(input);
    if (input.ExclusiveStartKey) wire.ExclusiveStartKey = toWire(input.ExclusiveStartKey);
    const out = await this.send(operation, wire);
    return {
      Items: ((out.Items as unknown[] | undefined) ?? []).map(fromWire),
      Count: Number(out.Count ?? 0),
      LastEvaluatedKey: optional(out.LastEvaluatedKey, fromWire),
    };
  }

  private async send(operation: DynamoDbOperation, input: WireBody): Promise<WireBody> {
    try {
      return await this.transport.call(operation, input);
    } catch (err) {
      if (!(err instanceof DynamoDbServiceError)) throw err;
      const message = String(err.body.message ?? err.body.Message ?? err.message);
      if (err.code === 'ConditionalCheckFailedException') throw new ConditionalCheckFailedError(message, optional(err.body.Item, fromWire));
      if (err.code === 'TransactionCanceledException') {
        const reasons = (err.body.CancellationReasons as Array<{ Code?: string; Message?: string; Item?: unknown }> | undefined) ?? [];
        throw new TransactionCanceledError(
          message,
          reasons.map((reason) => ({ Code: reason.Code, Message: reason.Message, Item: optional(reason.Item, fromWire) })),
        );
      }
      throw err;
    }
  }
}
