import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { IdempotencyRecord } from '../../lambdas/core/state-machine';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { refusingItem } from '../../lambdas/store/refusals';
import { recordToItem } from '../../lambdas/store/record-item';
import { ensureTable } from '../../lambdas/store/table-schema';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { createTableWithoutIndex } from './engine-bench';
import type { BenchSection, SectionReport } from './section';

/**
 * What a replay's one request costs on DynamoDB Local by table shape and item, with no engine around it: the claim
 * of a key that already holds a result, a conditional PutItem that fails and returns the stored item (ALL_OLD).
 * It separates the parts of the engine-vs-Powertools replay figures that come from the table and the record:
 * - key only: Powertools' default table (partition key `id`), with an item the size of Powertools' record;
 * - composite key: `pk`/`sk`, the same small item;
 * - the project's table: the composite key plus the reconciler's sparse `attention` index, the same small item;
 * - the project's table with the engine's record (every field issue 2 asks it to keep).
 */
const CALLS = 1500;
const WARMUP = 200;
const POOL = 200;

type Shape = 'key_only' | 'composite_key' | 'with_index' | 'with_index_engine_record';

export const tableShapeBench: BenchSection = {
  key: 'tableShape',
  title: `A replay's failed conditional PutItem by table shape (DynamoDB Local; ${CALLS} calls each, interleaved)`,
  run: runTableShapeBench,
};

async function runTableShapeBench(): Promise<SectionReport> {
  const dynamo = await startDynamoDbLocal();
  const doc = createDynamoDbClient({ endpoint: dynamo.endpoint });
  try {
    const suffix = randomUUID().slice(0, 8);
    const tables = { keyOnly: `shape-key-${suffix}`, composite: `shape-composite-${suffix}`, indexed: `shape-indexed-${suffix}` };
    await doc.send(
      new CreateTableCommand({
        TableName: tables.keyOnly,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    await createTableWithoutIndex(doc, tables.composite);
    await ensureTable(doc, tables.indexed);

    const now = Date.now();
    // Powertools' record: status, expiry, in-progress expiry, payload hash, result as a JSON string.
    const small = (pk: string, status: string) => ({
      pk,
      sk: 'IDEM',
      status,
      expiration: Math.floor(now / 1000) + 86_400,
      in_progress_expiration: now + 30_000,
      validation: randomBytes(16).toString('hex'),
      data: JSON.stringify({ order_id: randomUUID() }),
    });
    const engineRecord = (pk: string, status: 'SUCCEEDED' | 'PROCESSING'): Record<string, unknown> => {
      const [, tenant, tool, idempotencyKey] = pk.split('#');
      const record: IdempotencyRecord = {
        tenant: tenant!,
        tool: tool!,
        idempotencyKey: idempotencyKey!,
        fingerprint: randomBytes(32).toString('hex'),
        status,
        ownerToken: randomUUID(),
        createdAt: now,
        updatedAt: now,
        leaseExpiresAt: now + 30_000,
        retainUntil: now + 86_400_000,
        expiresAt: Math.floor(now / 1000) + 86_400,
        traceId: randomUUID(),
        result: status === 'SUCCEEDED' ? { order_id: randomUUID() } : undefined,
      };
      return recordToItem(record);
    };
    const withoutSk = ({ sk: _sk, ...item }: Record<string, unknown>) => item;
    const shapes: Record<
      Shape,
      { table: string; stored(pk: string): Record<string, unknown>; claim(pk: string): Record<string, unknown> }
    > = {
      key_only: {
        table: tables.keyOnly,
        stored: (pk) => withoutSk(small(pk, 'COMPLETED')),
        claim: (pk) => withoutSk(small(pk, 'INPROGRESS')),
      },
      composite_key: { table: tables.composite, stored: (pk) => small(pk, 'COMPLETED'), claim: (pk) => small(pk, 'INPROGRESS') },
      with_index: { table: tables.indexed, stored: (pk) => small(pk, 'COMPLETED'), claim: (pk) => small(pk, 'INPROGRESS') },
      with_index_engine_record: {
        table: tables.indexed,
        stored: (pk) => engineRecord(pk, 'SUCCEEDED'),
        claim: (pk) => engineRecord(pk, 'PROCESSING'),
      },
    };
    const names = Object.keys(shapes) as Shape[];
    const pools = new Map<Shape, string[]>();
    for (const name of names) {
      const pool = Array.from({ length: POOL }, () => `IDEM#bench-tenant#create_order#${randomUUID()}`);
      for (const pk of pool) await doc.send(new PutCommand({ TableName: shapes[name].table, Item: shapes[name].stored(pk) }));
      pools.set(name, pool);
    }

    const latencies = new Map<Shape, number[]>(names.map((name) => [name, []]));
    for (let i = 0; i < WARMUP + CALLS; i++) {
      // Interleaved call by call, starting with a different shape each round: drift hits all alike.
      for (let k = 0; k < names.length; k++) {
        const name = names[(i + k) % names.length]!;
        const pk = pools.get(name)![i % POOL]!;
        const started = performance.now();
        try {
          await doc.send(
            new PutCommand({
              TableName: shapes[name].table,
              Item: shapes[name].claim(pk),
              ConditionExpression: 'attribute_not_exists(pk)',
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            }),
          );
          throw new Error(`${name}: the claim of an existing key succeeded`);
        } catch (err) {
          if (!refusingItem(err)) throw err;
        }
        if (i >= WARMUP) latencies.get(name)!.push(performance.now() - started);
      }
    }

    const p50 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const base = p50(latencies.get('key_only')!);
    const figures = Object.fromEntries(
      names.map((name) => {
        const median = p50(latencies.get(name)!);
        return [name, { p50_ms: Math.round(median * 1000) / 1000, p50_vs_key_only: Math.round((median / base) * 1000) / 1000 }];
      }),
    ) as Record<Shape, { p50_ms: number; p50_vs_key_only: number }>;
    const table: (string | number)[][] = [
      ['table and item', 'p50 ms', 'p50 vs key only'],
      ...names.map((name) => [name, figures[name].p50_ms, figures[name].p50_vs_key_only]),
    ];
    const notes = [
      `the index costs x${round(figures.with_index.p50_ms / figures.composite_key.p50_ms)} on a write that writes nothing (neither item carries its keys); ` +
        `the composite key x${round(figures.composite_key.p50_ms / figures.key_only.p50_ms)}; the engine's record on the project's table x${round(figures.with_index_engine_record.p50_ms / figures.with_index.p50_ms)}.`,
      'On DynamoDB itself, index updates are asynchronous and a failed conditional write changes no item, so no index.',
    ];
    return { figures: { ...figures, calls: CALLS }, table, notes };
  } finally {
    closeDynamoDbClient(doc);
    await dynamo.stop();
  }
}

const round = (n: number) => Math.round(n * 100) / 100;
