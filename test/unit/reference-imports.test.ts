import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * The reference endpoint is the toolkit's first user: its tools, its sandbox and `npm start` reach the toolkit only
 * through the public subpaths (`idempotent-mcp/engine`, `/dynamodb`, `/mcp`, ...), as a team's code does.
 * A relative import may stay within the reference endpoint's own code: its tools folder, its sandbox and the demo
 * downstream clients they call. Anything else under lambdas/ is the toolkit's inside.
 */
const REFERENCE_CODE = ['lambdas/mcp/tools', 'lambdas/sandbox', 'lambdas/downstream'];
const SCANNED = ['lambdas/mcp/tools', 'lambdas/sandbox', 'local', 'scripts/start.ts'];

const filesUnder = (path: string): string[] =>
  statSync(path).isDirectory() ? readdirSync(path).flatMap((name) => filesUnder(join(path, name))) : path.endsWith('.ts') ? [path] : [];

/** Static and dynamic import specifiers of a module, and re-exports. */
const specifiersOf = (source: string) => [...source.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm)].map((m) => m[1]!);

const within = (file: string, folder: string) => !relative(join(PROJECT_ROOT, folder), file).startsWith('..');

function toolkitInternalsImported(files: string[]): string[] {
  return files.flatMap((file) =>
    specifiersOf(readFileSync(file, 'utf8'))
      .filter((specifier) => specifier.startsWith('.'))
      .filter((specifier) => {
        const target = resolve(dirname(file), specifier);
        if (!within(target, 'lambdas')) return false;
        if (dirname(target) === dirname(file)) return false;
        return !REFERENCE_CODE.some((folder) => within(target, folder));
      })
      .map((specifier) => `${relative(PROJECT_ROOT, file)} imports ${specifier}`),
  );
}

it('the reference tools, the sandbox and `npm start` import the toolkit through its public subpaths only', () => {
  const files = SCANNED.flatMap((path) => filesUnder(join(PROJECT_ROOT, path)));
  expect(files.length).toBeGreaterThan(15);
  expect(toolkitInternalsImported(files)).toEqual([]);
});

it('finds a relative import into the toolkit, static or dynamic', () => {
  // scripts/start.ts loads the local stack with a dynamic import; the scan reads those too.
  expect(specifiersOf("const { a } = await import('../lambdas/engine/engine');\nimport { b } from '../lambdas/core/keys';")).toEqual([
    '../lambdas/engine/engine',
    '../lambdas/core/keys',
  ]);
  // A Lambda handler is the toolkit's inside: it may, and does, import it relatively, and the scan says so.
  expect(toolkitInternalsImported([join(PROJECT_ROOT, 'lambdas/handlers/consumer.ts')])).toContain('lambdas/handlers/consumer.ts imports ../config');
});
