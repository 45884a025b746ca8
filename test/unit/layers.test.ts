import madge from 'madge';
import { beforeAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * The toolkit's layers, lowest first: a module may import its own layer and the ones below, never one above, so
 * the arrows read one way (the pure core at the bottom, the handlers and the constructs at the top). madge reads
 * the imports (type-only ones too); this file holds the rules.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['lambdas/core'],
  ['lambdas/engine', 'lambdas/config.ts'],
  ['lambdas/observability', 'lambdas/auth'],
  ['lambdas/store'],
  ['lambdas/outbox'],
  ['lambdas/reconciler', 'lambdas/mcp'],
  ['lambdas/runtime'],
  ['lambdas/http'],
  ['lambdas/handlers', 'lambdas/dynamodb', 'lambdas/gateway'],
  ['lib', 'ops'],
];
/**
 * Arrows from a public subpath's entry file allowed above its layer, each with its reason. The `/mcp` surface offers
 * the approval page a team mounts beside its own MCP server (an HTTP handler, one layer up); entry points are to move
 * into one folder of their own (issue 34), which retires this list.
 */
const SURFACE_ARROWS: Readonly<Record<string, readonly string[]>> = {
  'lambdas/mcp/index.ts': ['lambdas/http/public-approval-page.ts'],
};
/** The agent's client shares only the pure core with the server. */
const CLIENT_MAY_IMPORT = ['client', 'lambdas/core'];

const within = (file: string, unit: string) => file === unit || file.startsWith(`${unit}/`);
const layerOf = (file: string) => LAYERS.findIndex((layer) => layer.some((unit) => within(file, unit)));

let graph: Record<string, string[]>;
let cycles: string[][];

beforeAll(async () => {
  const result = await madge(['lambdas', 'lib', 'client', 'ops'], {
    baseDir: PROJECT_ROOT,
    fileExtensions: ['ts'],
    tsConfig: `${PROJECT_ROOT}/tsconfig.json`,
    detectiveOptions: { ts: { skipTypeImports: false } },
  });
  graph = result.obj();
  cycles = result.circular();
}, 60_000);

it('the toolkit has no import cycle', () => {
  expect(Object.keys(graph).length).toBeGreaterThan(80);
  expect(cycles).toEqual([]);
});

it('every toolkit module sits in a layer, and imports only its own layer and those below', () => {
  const upward: string[] = [];
  for (const [from, targets] of Object.entries(graph)) {
    if (within(from, 'client')) continue;
    const layer = layerOf(from);
    expect(layer, `${from} is in no layer: add its folder to LAYERS`).toBeGreaterThanOrEqual(0);
    for (const to of targets) if (layerOf(to) > layer && !SURFACE_ARROWS[from]?.includes(to)) upward.push(`${from} -> ${to}`);
  }
  expect(upward).toEqual([]);
});

it('the client imports only itself and the pure core', () => {
  const outside = Object.entries(graph)
    .filter(([from]) => within(from, 'client'))
    .flatMap(([from, targets]) => targets.filter((to) => !CLIENT_MAY_IMPORT.some((unit) => within(to, unit))).map((to) => `${from} -> ${to}`));
  expect(outside).toEqual([]);
});

it('finds an upward arrow and a cycle when there is one', () => {
  expect(layerOf('lambdas/core/keys.ts')).toBeLessThan(layerOf('lambdas/config.ts'));
  expect(layerOf('lambdas/config.ts')).toBeLessThan(layerOf('lambdas/runtime/services.ts'));
  expect(layerOf('lambdas/handlers/endpoint.ts')).toBeGreaterThan(layerOf('lambdas/mcp/server.ts'));
});
