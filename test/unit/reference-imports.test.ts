import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { TOOLKIT, toolkitModules } from './toolkit';

/**
 * The toolkit is what a team installs: `exports/` (the public subpaths' entry files), `lambdas/` (the runtime, the
 * local server of `idempotent-mcp dev` in `lambdas/local/`), `lib/` (the constructs), `client/` and `lambdas/ops/`.
 * The reference endpoint (`reference/`: its demo tools, their downstream clients, the sandbox, its settings, its
 * stack and its local demo stack) is the toolkit's first user: it, `npm start` (`scripts/start.ts`) and the CDK app
 * (`bin/app.ts`) reach the toolkit only through the public subpaths (`idempotent-mcp/engine`, `/mcp`, `/lambda`,
 * `/local`, ...), as a team's code does. So does the gateway (`lambdas/gateway/`), shipped with the toolkit but
 * written as a team writing its own gateway would write it.
 */
const REFERENCE_CODE = ['reference'];
const SCANNED = ['reference', 'scripts/start.ts', 'bin/app.ts', 'lambdas/gateway'];
/** The gateway's modules `IdempotentMcpGateway` (lib/gateway-construct.ts) reads at synth. */
const SYNTH_TIME_GATEWAY = ['lambdas/gateway/policy.ts', 'lambdas/gateway/config.ts'];

const filesUnder = (path: string): string[] =>
  statSync(path).isDirectory() ? readdirSync(path).flatMap((name) => filesUnder(join(path, name))) : path.endsWith('.ts') ? [path] : [];

/** Static and dynamic import specifiers of a module, and re-exports. */
const specifiersOf = (source: string) =>
  [...source.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm)].map((m) => m[1]!);

const within = (file: string, folder: string) => !relative(join(PROJECT_ROOT, folder), file).startsWith('..');

function toolkitInternalsImported(files: string[]): string[] {
  return files.flatMap((file) =>
    specifiersOf(readFileSync(file, 'utf8'))
      .filter((specifier) => specifier.startsWith('.'))
      .filter((specifier) => {
        const target = resolve(dirname(file), specifier);
        // The state file `npm start` writes for the ops bin is the ops bin's own format, written by its own code.
        if (within(target, 'lambdas/ops/local-state')) return false;
        // The gateway is the toolkit's customer too, in the toolkit's folder: its own modules import each other.
        if (within(file, 'lambdas/gateway') && within(target, 'lambdas/gateway')) return false;
        // Save the two the CDK construct reads at synth (its policy's format, its environment's names): through the
        // subpaths' entry files they would load the engine and the Lambda runtime into `idempotent-mcp/cdk` (its
        // build reached the MCP SDK, Hono and Powertools). They import the pure core and the settings' helpers only.
        if (
          SYNTH_TIME_GATEWAY.includes(relative(PROJECT_ROOT, file)) &&
          (within(target, 'lambdas/core') || within(target, 'lambdas/config') || within(target, 'lambdas/env-var'))
        )
          return false;
        // The upstream client sits below the public subpaths too (`idempotent-mcp check` shares it) and keeps its
        // connections across calls, as the agent's client does: both take the pure core's per-request abort signals
        // (lambdas/core/request-signals.ts), one copy, since the client may import nothing of lambdas/ but the core.
        if (relative(PROJECT_ROOT, file) === 'lambdas/gateway/upstream.ts' && within(target, 'lambdas/core/request-signals')) return false;
        return TOOLKIT.some((folder) => within(target, folder));
      })
      .map((specifier) => `${relative(PROJECT_ROOT, file)} imports ${specifier}`),
  );
}

it('the reference endpoint, `npm start`, the CDK app and the gateway import the toolkit through its public subpaths only', () => {
  const files = SCANNED.flatMap((path) => filesUnder(join(PROJECT_ROOT, path)));
  expect(files.length).toBeGreaterThan(25);
  expect(toolkitInternalsImported(files)).toEqual([]);
});

it('finds a relative import into the toolkit, static or dynamic', () => {
  // scripts/start.ts loads the local stack with a dynamic import; the scan reads those too.
  expect(specifiersOf("const { a } = await import('../lambdas/engine/engine');\nimport { b } from '../lambdas/core/keys';")).toEqual([
    '../lambdas/engine/engine',
    '../lambdas/core/keys',
  ]);
  // A toolkit handler is the toolkit's inside: it may, and does, import it relatively, and the scan says so.
  expect(toolkitInternalsImported([join(PROJECT_ROOT, 'lambdas/functions/consumer-endpoint.ts')])).toContain(
    'lambdas/functions/consumer-endpoint.ts imports ../config',
  );
});

/** The public subpaths' sources, as tsconfig.json maps them (`idempotent-mcp/mcp` -> exports/mcp.ts, ...). */
const SUBPATHS: Record<string, string> = Object.fromEntries(
  Object.entries(
    (JSON.parse(readFileSync(join(PROJECT_ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: { paths: Record<string, string[]> } })
      .compilerOptions.paths,
  ).map(([name, [target]]) => [name, resolve(PROJECT_ROOT, target!)]),
);

const CANDIDATES = ['', '.ts', '/index.ts'];

/** Every project module `entry` reaches through its imports (static, dynamic, type-only), itself included. */
function reachableFrom(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of specifiersOf(readFileSync(file, 'utf8'))) {
      const base = specifier.startsWith('.') ? resolve(dirname(file), specifier) : SUBPATHS[specifier];
      if (!base) continue; // a package outside the project
      const target = CANDIDATES.map((suffix) => base + suffix).find(
        (path) => path.endsWith('.ts') && statSync(path, { throwIfNoEntry: false })?.isFile(),
      );
      if (!target) throw new Error(`${relative(PROJECT_ROOT, file)}: cannot resolve ${specifier}`);
      visit(target);
    }
  };
  visit(resolve(PROJECT_ROOT, entry));
  return seen;
}

const reachedUnder = (entries: string[], folders: string[]) =>
  entries.flatMap((entry) =>
    [...reachableFrom(entry)]
      .filter((file) => folders.some((folder) => within(file, folder)))
      .map((file) => `${entry} reaches ${relative(PROJECT_ROOT, file)}`),
  );

/** The Lambda functions' entries every team's endpoint runs (its tools and deliveries modules are bundled with them). */
const TEAM_FUNCTIONS = [
  'lambdas/functions/endpoint.ts',
  'lambdas/functions/relay.ts',
  'lambdas/functions/consumer-endpoint.ts',
  'lambdas/functions/reconciler-endpoint.ts',
];

it('the public subpaths, the Lambda functions every team runs and every toolkit module reach no reference code', () => {
  const publicEntries = [...new Set(Object.values(SUBPATHS))].map((file) => relative(PROJECT_ROOT, file));
  expect(publicEntries).toEqual(
    expect.arrayContaining([
      'exports/engine.ts',
      'exports/dynamodb.ts',
      'exports/mcp.ts',
      'exports/lambda.ts',
      'exports/cdk.ts',
      'exports/client.ts',
    ]),
  );
  const modules = toolkitModules();
  expect(modules.length).toBeGreaterThan(60);
  expect(reachedUnder([...publicEntries, ...TEAM_FUNCTIONS, ...modules], REFERENCE_CODE)).toEqual([]);
});

it('the walk sees through the public subpaths: the reference consumer reaches its deliveries and the toolkit', () => {
  expect([...reachableFrom('reference/handlers/consumer.ts')].map((file) => relative(PROJECT_ROOT, file))).toEqual(
    expect.arrayContaining(['reference/tools/reference-deliveries.ts', 'exports/lambda.ts', 'reference/downstream/ses-email.ts']),
  );
  expect(reachedUnder(['reference/handlers/consumer.ts'], REFERENCE_CODE).length).toBeGreaterThan(0);
});
