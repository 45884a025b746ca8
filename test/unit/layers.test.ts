import madge from 'madge';
import { beforeAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { toolkitModules } from './toolkit';

/**
 * The toolkit's layers, lowest first: a module may import its own layer and the ones below, never one above, so
 * the arrows read one way (the pure core at the bottom; the Lambda functions' entries, the constructs and, last, the public entry files at the top). madge reads
 * the imports (type-only ones too); this file holds the rules.
 */
const LAYERS: readonly (readonly string[])[] = [
  // A concern's pure rules sit in its own core/ (lambdas/confirmation/core): the bottom layer, as lambdas/core.
  ['lambdas/core', 'lambdas/confirmation/core'],
  ['lambdas/engine', 'lambdas/confirmation', 'lambdas/config.ts', 'lambdas/env-var.ts'],
  ['lambdas/observability', 'lambdas/auth'],
  ['lambdas/store'],
  ['lambdas/outbox'],
  ['lambdas/reconciler', 'lambdas/mcp'],
  ['lambdas/runtime'],
  ['lambdas/http'],
  // Of the gateway: its policy's format and its environment's names, which the CDK construct reads at synth, and
  // its lookups, upstream client and credentials, which `idempotent-mcp check` shares (none imports the toolkit's
  // runtime).
  [
    'lambdas/functions',
    ...['policy', 'lookup', 'config', 'upstream', 'credentials'].map((name) => `lambdas/gateway/${name}.ts`),
    'lambdas/check',
  ],
  ['lib', 'lambdas/ops', 'lambdas/local'],
  // The public subpaths' entry files (exports/<subpath>.ts): they only name what the layers below offer.
  ['exports'],
  // The gateway's runtime, written on the public subpaths as a team's own gateway would be.
  ['lambdas/gateway'],
];
const within = (file: string, unit: string) => file === unit || file.startsWith(`${unit}/`);
/** The agent's client shares only the pure core with the server; so do the client's entry files. */
const CLIENT_MAY_IMPORT = ['client', 'lambdas/core'];
const isClientCode = (file: string) => within(file, 'client') || /^exports\/client(-[a-z-]+)?\.ts$/.test(file);

const layerOf = (file: string) => LAYERS.findIndex((layer) => layer.some((unit) => within(file, unit)));

let graph: Record<string, string[]>;
let cycles: string[][];

beforeAll(async () => {
  const result = await madge(toolkitModules(), {
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
  // The tests beside the modules are not counted (their imports may reach anything), the modules they test are.
  expect(Object.keys(graph).filter((file) => file.endsWith('.test.ts'))).toEqual([]);
  expect(Object.keys(graph)).toContain('lambdas/core/fingerprint.ts');
  const upward: string[] = [];
  for (const [from, targets] of Object.entries(graph)) {
    if (isClientCode(from)) continue;
    const layer = layerOf(from);
    expect(layer, `${from} is in no layer: add its folder to LAYERS`).toBeGreaterThanOrEqual(0);
    for (const to of targets) if (layerOf(to) > layer) upward.push(`${from} -> ${to}`);
  }
  expect(upward).toEqual([]);
});

it('the CDK code loads no runtime: the paths it routes come from lambdas/core/endpoint-paths.ts, not the MCP or HTTP runtime', () => {
  const reached = new Set<string>();
  const pending = Object.keys(graph).filter((file) => within(file, 'lib'));
  while (pending.length > 0) for (const to of graph[pending.pop()!] ?? []) if (!reached.has(to)) reached.add(to), pending.push(to);
  expect(reached.has('lambdas/core/endpoint-paths.ts')).toBe(true);
  const RUNTIME = ['lambdas/mcp', 'lambdas/http', 'lambdas/runtime', 'lambdas/functions', 'lambdas/engine'];
  expect([...reached].filter((file) => RUNTIME.some((unit) => within(file, unit)))).toEqual([]);
});

it('the client and its entry files import only the client and the pure core', () => {
  const clientFiles = Object.keys(graph).filter(isClientCode);
  expect(clientFiles).toEqual(expect.arrayContaining(['client/idempotent-client.ts', 'exports/client.ts', 'exports/client-testing.ts']));
  const outside = Object.entries(graph)
    .filter(([from]) => isClientCode(from))
    .flatMap(([from, targets]) =>
      targets.filter((to) => !CLIENT_MAY_IMPORT.some((unit) => within(to, unit))).map((to) => `${from} -> ${to}`),
    );
  expect(outside).toEqual([]);
});

it('finds an upward arrow and a cycle when there is one', () => {
  expect(layerOf('lambdas/core/keys.ts')).toBeLessThan(layerOf('lambdas/config.ts'));
  expect(layerOf('lambdas/confirmation/core/approval.ts')).toBeLessThan(layerOf('lambdas/confirmation/gate.ts'));
  expect(layerOf('lambdas/config.ts')).toBeLessThan(layerOf('lambdas/runtime/services.ts'));
  expect(layerOf('lambdas/functions/endpoint.ts')).toBeGreaterThan(layerOf('lambdas/mcp/server.ts'));
  expect(layerOf('exports/mcp.ts')).toBeGreaterThan(layerOf('lib/endpoint.ts'));
  expect(isClientCode('exports/client-testing.ts') && !isClientCode('exports/cdk.ts')).toBe(true);
});
