import { randomUUID } from 'node:crypto';
import { CreateTableCommand, DeleteTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { IdempotencyValidationError, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { IdempotencyEngine } from '../../lambdas/engine/engine';
import { closeDynamoDbClient, createDynamoDbBaseClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { ensureTable } from '../../lambdas/store/table-schema';
import { orderKey } from '../../reference/tools/orders';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { COMPUTED_RULES, type CapacityMeter, meterCapacity, ON_DEMAND_PRICING, perCall, type PhaseCapacity } from './capacity-meter';
import { powertoolsConfig } from './engine-bench';
import type { BenchSection, SectionReport } from './section';

/**
 * The DynamoDB capacity each call consumes, ours against Powertools' idempotency on the same SDK client and the same
 * DynamoDB Local, and what a million calls cost at on-demand prices: the contenders, the phases each runs, and the
 * section's report. The counting (what DynamoDB reports, what is computed from its rules) is
 * test/bench/capacity-meter.ts's.
 */

// --- the contenders -------------------------------------------------------------------------------------------

const TENANT = 'bench-tenant';
const LAMBDA_REMAINING_MS = 30_000;

/**
 * engine_local: create_order's shape (effect 'local': the record and the order commit in one transaction).
 * engine_claimed: request_payment's shape (the effect is outside DynamoDB: claim, call, settle the record).
 * powertools_local / powertools_external: the same two tools under Powertools' `makeIdempotent` (DynamoDB
 * persistence, payload validation on); the local one writes its order with a PutItem of its own.
 */
export const CAPACITY_VARIANTS = ['engine_local', 'engine_claimed', 'powertools_local', 'powertools_external'] as const;
export type CapacityVariant = (typeof CAPACITY_VARIANTS)[number];
/**
 * replay / conflict: the same key again, on the engine (container) that answered it. The `_other_container` phases
 * (the engine's local tool only; nothing else keeps state between calls) send it to a fresh engine on the same table:
 * as a third-party client would, with no hint, and `_hinted` as our client does (a key it sends again carries the
 * replay hint, `likelyReplay`).
 */
export type CapacityPhase =
  | 'first_call'
  | 'replay'
  | 'conflict'
  | 'replay_other_container'
  | 'conflict_other_container'
  | 'replay_other_container_hinted'
  | 'conflict_other_container_hinted';
type Outcome = 'executed' | 'replayed' | 'conflict' | 'other';

interface Args {
  customer_id: string;
  items: { sku: string; quantity: number }[];
  currency: string;
}
const argsFor = (quantity: number): Args => ({
  customer_id: 'cust-0042',
  items: [
    { sku: 'SKU-1', quantity },
    { sku: 'SKU-2', quantity: 1 },
  ],
  currency: 'EUR',
});

interface Contender {
  call(key: string, args: Args, on?: { otherContainer?: boolean; hinted?: boolean }): Promise<Outcome>;
}

export interface CapacityTables {
  engine: string;
  powertools: string;
  business: string;
}

function engineContender(doc: DynamoDBDocumentClient, table: string, local: boolean): Contender {
  const store = new DynamoDbIdempotencyStore({ client: doc, tableName: table });
  const engine = new IdempotencyEngine({ store });
  return {
    async call(key, args, { otherContainer = false, hinted = false } = {}) {
      const on = otherContainer ? new IdempotencyEngine({ store }) : engine;
      const answer = await on.run<Record<string, unknown>>(
        {
          tenant: TENANT,
          tool: local ? 'create_order' : 'request_payment',
          idempotencyKey: key,
          args: { ...args },
          remainingTimeMs: () => LAMBDA_REMAINING_MS,
          effect: local ? 'local' : 'external',
          likelyReplay: hinted,
        },
        {},
        async (ctx) => {
          const id = `${ctx.tool}-${randomUUID()}`;
          if (!local) return { result: { payment_id: id, status: 'succeeded', amount_minor: 1250, currency: args.currency } };
          const order = { order_id: id, status: 'created', ...args, created_at: new Date().toISOString() };
          return {
            result: order,
            writes: [{ create: { key: orderKey(TENANT, id), item: { kind: 'order', tenant: TENANT, idempotency_key: key, ...order } } }],
          };
        },
      );
      if (answer.outcome === 'succeeded') return answer.replayed ? 'replayed' : 'executed';
      return answer.outcome === 'conflict' ? 'conflict' : 'other';
    },
  };
}

function powertoolsContender(client: DynamoDBClient, doc: DynamoDBDocumentClient, tables: CapacityTables, local: boolean): Contender {
  const config = powertoolsConfig();
  const handler = makeIdempotent(
    async (event: { tenant: string; idempotency_key: string; args: Args; trace_id: string }) => {
      const id = randomUUID();
      if (!local)
        return { payment_id: id, status: 'succeeded', amount_minor: 1250, currency: event.args.currency, trace_id: event.trace_id };
      const order = { order_id: id, status: 'created', ...event.args, created_at: new Date().toISOString() };
      await doc.send(
        new PutCommand({ TableName: tables.business, Item: { ...orderKey(TENANT, id), kind: 'order', tenant: TENANT, ...order } }),
      );
      return { ...order, trace_id: event.trace_id };
    },
    { persistenceStore: new DynamoDBPersistenceLayer({ tableName: tables.powertools, awsSdkV3Client: client }), config },
  );
  return {
    async call(key, args) {
      const traceId = randomUUID();
      try {
        const result = await handler({ tenant: TENANT, idempotency_key: key, args, trace_id: traceId });
        return result.trace_id === traceId ? 'executed' : 'replayed';
      } catch (err) {
        return err instanceof IdempotencyValidationError ? 'conflict' : 'other';
      }
    },
  };
}

export interface CapacityRun {
  capacity: Record<CapacityVariant, Partial<Record<CapacityPhase, PhaseCapacity>>>;
  /** Calls whose outcome was not their phase's (should be 0). */
  unexpected_outcomes: number;
}

const PHASES: Record<CapacityVariant, CapacityPhase[]> = {
  engine_local: [
    'first_call',
    'replay',
    'conflict',
    'replay_other_container',
    'conflict_other_container',
    'replay_other_container_hinted',
    'conflict_other_container_hinted',
  ],
  engine_claimed: ['first_call', 'replay', 'conflict'],
  powertools_local: ['first_call', 'replay', 'conflict'],
  powertools_external: ['first_call', 'replay', 'conflict'],
};

/** The tables a run needs, on `doc`: the engine's (its own shape), Powertools' default (`id`), the orders'. */
export async function createCapacityTables(doc: DynamoDBDocumentClient): Promise<CapacityTables> {
  const suffix = randomUUID().slice(0, 8);
  const tables = {
    engine: `capacity-engine-${suffix}`,
    powertools: `capacity-powertools-${suffix}`,
    business: `capacity-orders-${suffix}`,
  };
  await ensureTable(doc, tables.engine);
  await ensureTable(doc, tables.business);
  await doc.send(
    new CreateTableCommand({
      TableName: tables.powertools,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    }),
  );
  return tables;
}

/**
 * Runs every variant's phases, `calls` calls each, one call at a time (so each request is counted in its phase),
 * on one client carrying the meter; the engine and Powertools share it.
 */
export async function measureCapacity(
  client: DynamoDBClient,
  meter: CapacityMeter,
  tables: CapacityTables,
  calls: number,
): Promise<CapacityRun> {
  const doc = createDynamoDbClient({ awsSdkV3Client: client });
  const contenders: Record<CapacityVariant, Contender> = {
    engine_local: engineContender(doc, tables.engine, true),
    engine_claimed: engineContender(doc, tables.engine, false),
    powertools_local: powertoolsContender(client, doc, tables, true),
    powertools_external: powertoolsContender(client, doc, tables, false),
  };
  const capacity = {} as CapacityRun['capacity'];
  let unexpected = 0;
  for (const variant of CAPACITY_VARIANTS) {
    const contender = contenders[variant];
    const keys = Array.from({ length: calls }, () => randomUUID());
    const row: Partial<Record<CapacityPhase, PhaseCapacity>> = {};
    for (const phase of PHASES[variant]) {
      meter.take();
      const expected: Outcome = phase === 'first_call' ? 'executed' : phase.startsWith('replay') ? 'replayed' : 'conflict';
      for (const key of keys) {
        const outcome = await contender.call(key, argsFor(phase.startsWith('conflict') ? 2 : 1), {
          otherContainer: phase.includes('_other_container'),
          hinted: phase.endsWith('_hinted'),
        });
        if (outcome !== expected) unexpected++;
      }
      row[phase] = perCall(meter.take(), calls);
    }
    capacity[variant] = row;
  }
  return { capacity, unexpected_outcomes: unexpected };
}

// --- the section ----------------------------------------------------------------------------------------------

const CALLS = 50;

export const capacityBench: BenchSection = {
  key: 'capacity',
  title: `DynamoDB capacity per call and on-demand cost per million calls, engine vs Powertools (DynamoDB Local; ${CALLS} calls per phase)`,
  run: runCapacityBench,
};

async function runCapacityBench(): Promise<SectionReport> {
  const dynamo = await startDynamoDbLocal();
  const client = createDynamoDbBaseClient({ endpoint: dynamo.endpoint });
  const sizing = createDynamoDbBaseClient({ endpoint: dynamo.endpoint });
  const admin = createDynamoDbClient({ awsSdkV3Client: sizing });
  const meter = meterCapacity(client, sizing);
  let tables: CapacityTables | undefined;
  try {
    tables = await createCapacityTables(admin);
    const run = await measureCapacity(client, meter, tables, CALLS);
    return capacityReport(run);
  } finally {
    await meter.close();
    for (const name of Object.values(tables ?? {})) await admin.send(new DeleteTableCommand({ TableName: name })).catch(() => {});
    closeDynamoDbClient(client);
    closeDynamoDbClient(sizing);
    await dynamo.stop();
  }
}

export function capacityReport(run: CapacityRun): SectionReport {
  const { capacity } = run;
  const table: (string | number)[][] = [['variant', 'phase', 'WCU', 'RCU', 'requests', 'basis', 'USD per 1M calls']];
  const costs: Record<string, Record<string, number>> = {};
  for (const variant of CAPACITY_VARIANTS) {
    for (const [phase, f] of Object.entries(capacity[variant])) {
      table.push([variant, phase, f.wcu, f.rcu, f.requests, f.basis, f.cost_per_million_usd]);
      (costs[variant] ??= {})[phase] = f.cost_per_million_usd;
    }
  }
  const usd = (variant: CapacityVariant, phase: CapacityPhase) => capacity[variant][phase]?.cost_per_million_usd ?? NaN;
  const targets = {
    /** The issue's target: a replay of ours costs no more than Powertools' replay of the same tool. */
    replay_no_dearer_than_powertools: {
      local: { engine: usd('engine_local', 'replay'), powertools: usd('powertools_local', 'replay') },
      claimed: { engine: usd('engine_claimed', 'replay'), powertools: usd('powertools_external', 'replay') },
      met:
        usd('engine_local', 'replay') <= usd('powertools_local', 'replay') &&
        usd('engine_claimed', 'replay') <= usd('powertools_external', 'replay'),
    },
    /** Our client's retry on a container that never answered the key: its replay hint makes it a read. */
    replay_other_container_hinted: {
      engine: usd('engine_local', 'replay_other_container_hinted'),
      powertools: usd('powertools_local', 'replay'),
      met: usd('engine_local', 'replay_other_container_hinted') <= usd('powertools_local', 'replay'),
    },
    /** Not met (see docs/benchmarks.md): a third-party client's replay, with no hint, on a container that never answered the key. */
    replay_other_container: { engine: usd('engine_local', 'replay_other_container'), powertools: usd('powertools_local', 'replay') },
  };
  const notes = [
    `replay no dearer than Powertools' [${targets.replay_no_dearer_than_powertools.met ? 'met' : 'MISSED'}]: local $${targets.replay_no_dearer_than_powertools.local.engine} vs $${targets.replay_no_dearer_than_powertools.local.powertools}, claimed $${targets.replay_no_dearer_than_powertools.claimed.engine} vs $${targets.replay_no_dearer_than_powertools.claimed.powertools} per million`,
    `our client's retry of a local tool on a container that never answered the key (replay hint) [${targets.replay_other_container_hinted.met ? 'met' : 'MISSED'}]: $${targets.replay_other_container_hinted.engine} vs Powertools' $${targets.replay_other_container_hinted.powertools} per million`,
    `a local tool's replay without the hint (a third-party client) on a container that never answered the key is a refused transaction carrying the record and the tool's items: $${targets.replay_other_container.engine} per million (computed)`,
    "first calls: the local tool's one transaction writes each item twice (prepare and commit); the claimed path's record carries the reconciler's attention index while it runs (one index write on the claim, one on the settle). Powertools writes its record twice, with neither.",
    `computed figures (refused writes, cancelled transactions) carry no ConsumedCapacity in DynamoDB's answer; rules: ${Object.values(COMPUTED_RULES).join(' | ')}`,
    `prices: ${ON_DEMAND_PRICING.source} (${ON_DEMAND_PRICING.region}, ${ON_DEMAND_PRICING.tableClass}, as of ${ON_DEMAND_PRICING.pricesAsOf}): $${ON_DEMAND_PRICING.usdPerMillionWriteRequestUnits} per million WRU, $${ON_DEMAND_PRICING.usdPerMillionReadRequestUnits} per million RRU. Unexpected outcomes: ${run.unexpected_outcomes}.`,
  ];
  return {
    figures: {
      ...capacity,
      cost_per_million_usd: costs,
      targets,
      pricing: ON_DEMAND_PRICING,
      computed_rules: COMPUTED_RULES,
      unexpected_outcomes: run.unexpected_outcomes,
    },
    table,
    notes,
  };
}
