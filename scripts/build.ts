/**
 * `npm run build`: the package's public subpaths to dist/ (ESM, one shared copy of each module across subpaths),
 * the Lambda functions' entries (lambdas/functions/) the constructs bundle once installed, their bundle stubs, and type declarations.
 * The subpaths come from tsconfig.json's `paths`, the one map tsc, tsx, vitest and package.json's `exports` share.
 */
import { cpSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { build } from 'esbuild';
import { emitDeclarations, PROJECT_ROOT, publicSubpaths } from './declarations';

const root = PROJECT_ROOT;
const dist = join(root, 'dist');
const FUNCTIONS = ['endpoint', 'reconciler-endpoint', 'consumer-endpoint', 'relay'];

/**
 * A bin whose released file name stays while its source is named for what it is: the deprecated
 * `idempotent-mcp-gateway` alias is dist/bin/gateway.js, as in the release that introduced it.
 */
const RENAMED_BINS: Readonly<Record<string, string>> = { 'bin/gateway': 'bin/gateway-alias.ts' };

const subpaths = publicSubpaths();

rmSync(dist, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: [
    ...subpaths.map(({ out, source }) => ({ out, in: source })),
    ...FUNCTIONS.map((name) => ({ out: `functions/${name}`, in: `lambdas/functions/${name}.ts` })),
    // What IdempotentMcpGateway's generated tools module imports (lib/tools-entry.ts).
    { out: 'functions/gateway', in: 'lambdas/gateway/lambda.ts' },
    // The handlers' checks of a tools module, which the constructs run at synth (lib/tools-check.ts).
    { out: 'functions/tools-exports', in: 'lambdas/functions/tools-exports.ts' },
    // The package's bin (package.json `bin`), its shebang kept.
    ...Object.values<string>(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).bin ?? {}).map((built) => {
      const out = built.replace(/^(\.\/)?dist\//, '').replace(/\.js$/, '');
      return { out, in: RENAMED_BINS[out] ?? `${out}.ts` };
    }),
  ],
  outdir: dist,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Dependencies stay imports: the app that installs the package resolves (and its Lambda bundles tree-shake) them.
  packages: 'external',
  chunkNames: 'chunks/[name]-[hash]',
  logLevel: 'warning',
});
cpSync(join(root, 'lib/bundle-stubs'), join(dist, 'bundle-stubs'), { recursive: true });
// What `idempotent-mcp dev` starts DynamoDB Local with (lambdas/local/dynamodb-local.ts finds it through packageFile).
cpSync(join(root, 'lambdas/local/dynamodb-local.xml'), join(dist, 'dynamodb-local.xml'));

emitDeclarations(join(dist, 'types'));

// package.json's exports must name exactly these files.
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
for (const { name, out, source } of subpaths) {
  const expected = { types: `./dist/types/${source.replace(/\.ts$/, '.d.ts')}`, default: `./dist/${out}.js` };
  const declared = manifest.exports?.[`./${out}`];
  if (JSON.stringify(declared) !== JSON.stringify(expected)) {
    throw new Error(`package.json exports["./${out}"] must be ${JSON.stringify(expected)} (${name})`);
  }
  for (const file of Object.values(expected)) if (!existsSync(join(root, file))) throw new Error(`build did not write ${file}`);
}
console.log(`built ${subpaths.length} subpaths and ${FUNCTIONS.length} function entries into ${relative(process.cwd(), dist) || 'dist'}/`);
