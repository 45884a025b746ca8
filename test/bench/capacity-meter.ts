import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  PutItemCommand,
  type AttributeValue,
  type ConsumedCapacity,
  type DynamoDBClient,
  type KeySchemaElement,
} from '@aws-sdk/client-dynamodb';

/**
 * The DynamoDB capacity a client consumes, and its cost at on-demand prices, for the capacity section
 * (test/bench/capacity.ts). Captured in one place: `meterCapacity`, a middleware on the client that asks every
 * request for `ReturnConsumedCapacity: 'INDEXES'` and reads the answer.
 *
 * A refused conditional write and a cancelled transaction carry no ConsumedCapacity in their error (DynamoDB Local
 * and DynamoDB alike), so their capacity is computed from DynamoDB's documented rules (`COMPUTED_RULES`), with each
 * item's size as DynamoDB Local measures it: an unconditional PutItem of the item into an empty scratch table of the
 * same key schema. Every figure says which it is.
 */

/**
 * DynamoDB on-demand throughput prices, US East (N. Virginia), Standard table class: the one place they are kept.
 * In effect since the price reduction of 2024-11-01; update them and the date here when the page changes.
 */
export const ON_DEMAND_PRICING = {
  source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
  region: 'us-east-1',
  tableClass: 'Standard',
  pricesAsOf: '2024-11-01',
  usdPerMillionWriteRequestUnits: 0.625,
  usdPerMillionReadRequestUnits: 0.125,
} as const;

/** The rules a computed figure applies (docs.aws.amazon.com/amazondynamodb/latest/developerguide/...). */
export const COMPUTED_RULES = {
  refusedConditionalWrite:
    'read-write-operations.html, conditional writes: a write whose condition fails still consumes write capacity, by the larger of the existing item and the new one (1 WCU per KB, at least 1)',
  cancelledTransaction:
    'transaction-apis.html, capacity management: "You pay only for the reads or writes that are part of your transaction. DynamoDB performs two underlying reads or writes of every item in the transaction"; a cancelled TransactWriteItems is counted as a transactional write of every action (two writes each, by the larger of its existing and new item, at least 1): nothing in the guide bills a cancelled one less',
} as const;

/** One phase's capacity per call, averaged over its calls. */
export interface PhaseCapacity {
  wcu: number;
  rcu: number;
  requests: number;
  /** 'measured': every unit came from ConsumedCapacity; 'computed': none did; 'measured+computed': both. */
  basis: 'measured' | 'computed' | 'measured+computed' | 'none';
  /** The part of `wcu` computed from the rules, not reported by DynamoDB Local. */
  computed_wcu: number;
  cost_per_million_usd: number;
}

interface Totals {
  measuredWcu: number;
  measuredRcu: number;
  computedWcu: number;
  requests: number;
}

export interface CapacityMeter {
  /** What the client consumed since the last `take`, and starts counting afresh. */
  take(): Totals;
  /** Write capacity units of an item (marshalled) written to an empty table of `table`'s key schema. */
  itemWcu(table: string, item: Record<string, AttributeValue>): Promise<number>;
  close(): Promise<void>;
}

const READS = new Set(['GetItem', 'Query', 'Scan', 'TransactGetItems', 'BatchGetItem']);
const WITH_CAPACITY = new Set([...READS, 'PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems', 'BatchWriteItem']);

type Marshalled = Record<string, AttributeValue>;
interface WriteAction {
  table: string;
  /** The item a Put writes (marshalled); none for Update, Delete, ConditionCheck. */
  item?: Marshalled;
  key?: Marshalled;
}

/**
 * Adds the capacity meter to `client` (and every document client over it). `sizing` is a second client to the same
 * endpoint, without the meter, for the scratch tables and the reads a computed figure needs.
 */
export function meterCapacity(client: DynamoDBClient, sizing: DynamoDBClient): CapacityMeter {
  let totals: Totals = { measuredWcu: 0, measuredRcu: 0, computedWcu: 0, requests: 0 };
  const scratch = new Map<string, Promise<{ name: string; keys: string[] }>>();
  const keySchemas = new Map<string, Promise<KeySchemaElement[]>>();

  const keySchemaOf = (table: string) => {
    let schema = keySchemas.get(table);
    if (!schema) {
      schema = sizing.send(new DescribeTableCommand({ TableName: table })).then((d) => d.Table!.KeySchema!);
      keySchemas.set(table, schema);
    }
    return schema;
  };
  const scratchFor = async (table: string) => {
    const described = (await sizing.send(new DescribeTableCommand({ TableName: table }))).Table!;
    const signature = JSON.stringify(described.KeySchema) + JSON.stringify(described.AttributeDefinitions);
    let made = scratch.get(signature);
    if (!made) {
      const name = `capacity-scratch-${randomUUID().slice(0, 8)}`;
      const keyNames = new Set(described.KeySchema!.map((k) => k.AttributeName));
      made = sizing
        .send(
          new CreateTableCommand({
            TableName: name,
            BillingMode: 'PAY_PER_REQUEST',
            KeySchema: described.KeySchema,
            AttributeDefinitions: described.AttributeDefinitions!.filter((a) => keyNames.has(a.AttributeName)),
          }),
        )
        .then(() => ({ name, keys: [...keyNames] as string[] }));
      scratch.set(signature, made);
    }
    return made;
  };
  const itemWcu = async (table: string, item: Marshalled) => {
    const { name, keys } = await scratchFor(table);
    const out = await sizing.send(new PutItemCommand({ TableName: name, Item: item, ReturnConsumedCapacity: 'TOTAL' }));
    await sizing.send(new DeleteItemCommand({ TableName: name, Key: Object.fromEntries(keys.map((k) => [k, item[k]!])) }));
    return out.ConsumedCapacity?.CapacityUnits ?? 0;
  };
  /** The stored item of a refused action when the refusal did not carry it. */
  const existingItem = async (action: WriteAction): Promise<Marshalled | undefined> => {
    let key = action.key;
    if (!key && action.item) {
      const names = (await keySchemaOf(action.table)).map((k) => k.AttributeName!);
      key = Object.fromEntries(names.map((n) => [n, action.item![n]!]));
    }
    if (!key) return undefined;
    return (await sizing.send(new GetItemCommand({ TableName: action.table, Key: key, ConsistentRead: true }))).Item;
  };
  /** One refused write: the larger of its existing item and the item it would write, at least 1. */
  const refusedWcu = async (action: WriteAction, existing: Marshalled | undefined) => {
    const stored = existing ?? (await existingItem(action));
    const sizes = await Promise.all([stored, action.item].filter((i): i is Marshalled => !!i).map((i) => itemWcu(action.table, i)));
    return Math.max(1, ...sizes);
  };

  const record = (operation: string, consumed: ConsumedCapacity | ConsumedCapacity[] | undefined) => {
    for (const c of [consumed ?? []].flat()) {
      if (READS.has(operation)) totals.measuredRcu += c.CapacityUnits ?? 0;
      else totals.measuredWcu += c.CapacityUnits ?? 0;
    }
  };

  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = String(context.commandName ?? '').replace(/Command$/, '');
      if (WITH_CAPACITY.has(operation)) (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity = 'INDEXES';
      return next(args);
    },
    { step: 'initialize', name: 'capacityMeterAsk', priority: 'high', override: true },
  );
  // After the document client marshalled the input (just before serializing): items are in DynamoDB JSON here.
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = String(context.commandName ?? '').replace(/Command$/, '');
      if (!WITH_CAPACITY.has(operation)) return next(args);
      totals.requests++;
      const input = args.input as Record<string, any>;
      try {
        const out = await next(args);
        record(operation, (out.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity);
        return out;
      } catch (err) {
        const e = err as {
          name?: string;
          Item?: Marshalled;
          CancellationReasons?: { Item?: Marshalled }[];
          ConsumedCapacity?: ConsumedCapacity[];
        };
        if (e.ConsumedCapacity) record(operation, e.ConsumedCapacity);
        else if (e.name === 'ConditionalCheckFailedException') {
          totals.computedWcu += await refusedWcu({ table: input.TableName, item: input.Item, key: input.Key }, e.Item);
        } else if (e.name === 'TransactionCanceledException') {
          const actions: WriteAction[] = (input.TransactItems as Record<string, any>[]).map((t) => {
            const a = t.Put ?? t.Update ?? t.Delete ?? t.ConditionCheck;
            return { table: a.TableName, item: t.Put?.Item, key: a.Key };
          });
          // Prepare and commit: a transactional write of each action costs twice a standard one (COMPUTED_RULES).
          const wcu = await Promise.all(actions.map((a, i) => refusedWcu(a, e.CancellationReasons?.[i]?.Item)));
          totals.computedWcu += 2 * wcu.reduce((s, n) => s + n, 0);
        }
        throw err;
      }
    },
    { step: 'build', name: 'capacityMeterRead', priority: 'high', override: true },
  );

  return {
    take() {
      const taken = totals;
      totals = { measuredWcu: 0, measuredRcu: 0, computedWcu: 0, requests: 0 };
      return taken;
    },
    itemWcu,
    async close() {
      for (const made of scratch.values()) await sizing.send(new DeleteTableCommand({ TableName: (await made).name })).catch(() => {});
    },
  };
}

export const costPerMillionUsd = (wcu: number, rcu: number) =>
  round4(wcu * ON_DEMAND_PRICING.usdPerMillionWriteRequestUnits + rcu * ON_DEMAND_PRICING.usdPerMillionReadRequestUnits);

/** One phase's totals as capacity per call, and its cost per million calls. */
export function perCall(t: Totals, calls: number): PhaseCapacity {
  const wcu = round4((t.measuredWcu + t.computedWcu) / calls);
  const rcu = round4(t.measuredRcu / calls);
  const measured = t.measuredWcu + t.measuredRcu > 0;
  const computed = t.computedWcu > 0;
  return {
    wcu,
    rcu,
    requests: round4(t.requests / calls),
    basis: measured && computed ? 'measured+computed' : measured ? 'measured' : computed ? 'computed' : 'none',
    computed_wcu: round4(t.computedWcu / calls),
    cost_per_million_usd: costPerMillionUsd(wcu, rcu),
  };
}

const round4 = (n: number) => Math.round(n * 10_000) / 10_000;
