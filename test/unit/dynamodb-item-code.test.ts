import madge from 'madge';
import { beforeAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { toolkitModules } from './toolkit';

/**
 * DynamoDB item code (the AWS SDK's DynamoDB packages, marshalling, item shapes: the record <-> item mapping, the
 * attention index's queries, the refusals read from the SDK's errors) lives in the DynamoDB adapter. Everything
 * else reaches the records through the store port (lambdas/engine/persistence.ts: `IdempotencyStore`,
 * `ReviewStore`, `RecordQueries`), so a second store needs one adapter, and the conformance suite covers what the
 * reconciler and the review desk ask. madge reads the imports (type-only ones too) of the toolkit's modules (what a
 * team installs: its entry files and what they reach; the tests beside the modules are none); the reference
 * endpoint's own tools write their own business items and are not walked.
 */

/** What counts as DynamoDB item code when imported. */
const ITEM_CODE: readonly RegExp[] = [
  // The AWS SDK's DynamoDB packages: client-dynamodb, lib-dynamodb (the document client), util-dynamodb (marshalling).
  /^node_modules\/@aws-sdk\/[a-z-]*dynamodb[a-z-]*\//,
  // The adapter's item modules: record <-> item, the attention index's queries, refusals, conditional claims, and the
  // write conditions and requests of the store's writes.
  /^lambdas\/store\/(record-item|attention-index|refusals|conditional-claim|record-conditions|record-requests)\.ts$/,
];

/**
 * The places that may hold item code, each on purpose. Importing the adapter's faces (the store classes, the client
 * factory, the table schema) is not item code: that is how a store is built and a table defined.
 */
const ALLOWED: Readonly<Record<string, string>> = {
  'lambdas/store/': 'the DynamoDB adapter itself: records, review logs, approvals, the attention index, the table schema and client',
  'lambdas/outbox/outbox-store.ts':
    "the outbox's DynamoDB adapter: events and delivery claims live in the records' table and commit in the record's transaction",
  'exports/dynamodb.ts':
    "the `/dynamodb` public subpath: it re-exports the adapter, refusal helpers included, for a team's own item writes",
  'lambdas/runtime/services.ts': "composition root: builds the document client the stores and the tools' own writes share (its type only)",
  'lambdas/runtime/worker-services.ts': 'composition root of the workers: the same document client (its type only)',
  'lambdas/ops/target.ts': 'composition root of `idempotent-mcp ops`: the document client of the table it reviews (its type only)',
  'lambdas/local/server.ts': 'composition root of a local endpoint: the document client its `serve` option gets (its type only)',
  'lambdas/local/dynamodb-local.ts':
    "DynamoDB Local's launcher: the workload its class archive is made from (a table, conditional and transactional writes, queries)",
  'lambdas/local/dynamodb-local-process.ts': "DynamoDB Local's launcher: whether the emulator answers (ListTables)",
};

const allowed = (file: string) => Object.keys(ALLOWED).some((place) => (place.endsWith('/') ? file.startsWith(place) : file === place));

/** Every arrow from a module outside the allowed places to item code. */
function itemCodeOutsideTheAdapter(graph: Record<string, string[]>): string[] {
  return Object.entries(graph)
    .filter(([from]) => !from.startsWith('node_modules/') && !allowed(from))
    .flatMap(([from, targets]) => targets.filter((to) => ITEM_CODE.some((code) => code.test(to))).map((to) => `${from} -> ${to}`));
}

let graph: Record<string, string[]>;

beforeAll(async () => {
  const result = await madge(toolkitModules(), {
    baseDir: PROJECT_ROOT,
    fileExtensions: ['ts'],
    tsConfig: `${PROJECT_ROOT}/tsconfig.json`,
    includeNpm: true,
    detectiveOptions: { ts: { skipTypeImports: false } },
  });
  graph = result.obj();
}, 60_000);

it('no toolkit module outside the DynamoDB adapter reads or builds a DynamoDB item', () => {
  expect(Object.keys(graph).length).toBeGreaterThan(80);
  expect(itemCodeOutsideTheAdapter(graph)).toEqual([]);
});

it('each allowed place exists (a place moved or gone is taken off the list)', () => {
  for (const place of Object.keys(ALLOWED)) {
    expect(
      Object.keys(graph).some((file) => (place.endsWith('/') ? file.startsWith(place) : file === place)),
      place,
    ).toBe(true);
  }
});

it('sees the SDK packages in the graph, and finds item code where it does not belong', () => {
  // madge resolves an npm import to its declarations: the adapter's own arrows show the SDK is seen at all.
  expect(graph['lambdas/store/dynamodb-idempotency-store.ts']?.some((to) => ITEM_CODE[0]!.test(to))).toBe(true);
  expect(
    itemCodeOutsideTheAdapter({
      'lambdas/reconciler/reconciler.ts': ['lambdas/store/record-item.ts', 'lambdas/engine/persistence.ts'],
      'lambdas/ops/review.ts': ['node_modules/@aws-sdk/util-dynamodb/dist-types/index.d.ts', 'lambdas/store/dynamodb-idempotency-store.ts'],
      'lambdas/store/dynamodb-idempotency-store.ts': ['node_modules/@aws-sdk/lib-dynamodb/dist-types/index.d.ts'],
      'lambdas/runtime/services.ts': ['node_modules/@aws-sdk/lib-dynamodb/dist-types/index.d.ts'],
    }),
  ).toEqual([
    'lambdas/reconciler/reconciler.ts -> lambdas/store/record-item.ts',
    'lambdas/ops/review.ts -> node_modules/@aws-sdk/util-dynamodb/dist-types/index.d.ts',
  ]);
});
