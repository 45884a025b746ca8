/**
 * `npm run build`: the package's public subpaths to dist/ (ESM, one shared copy of each module across subpaths),
 * the Lambda handlers the constructs bundle once installed, their bundle stubs, and type declarations.
 * The subpaths come from tsconfig.json's `paths`, the one map tsc, tsx, vitest and package.json's `exports` share.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
const dist = join(root, 'dist');
const PACKAGE = 'idempotent-mcp';
const paths: Record<string, [string]> = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')).compilerOptions.paths;
const HANDLERS = ['endpoint', 'reconciler-endpoint', 'consumer-endpoint', 'relay'];

/** `idempotent-mcp/engine/testing` -> `engine/testing` (dist/engine/testing.js). */
const subpaths = Object.entries(paths).map(([name, [source]]) => ({ name, out: name.slice(PACKAGE.length + 1), source: source.replace(/^\.\//, '') }));

rmSync(dist, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: [
    ...subpaths.map(({ out, source }) => ({ out, in: source })),
    ...HANDLERS.map((name) => ({ out: `handlers/${name}`, in: `lambdas/handlers/${name}.ts` })),
    // The package's bin (package.json `bin`), its shebang kept.
    ...Object.values<string>(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).bin ?? {}).map((built) => ({
      out: built.replace(/^(\.\/)?dist\//, '').replace(/\.js$/, ''),
      in: built.replace(/^(\.\/)?dist\//, '').replace(/\.js$/, '.ts'),
    })),
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

// Declarations: tsc from the entry files, then relative specifiers made explicit (`./engine.js`), so they resolve
// under moduleResolution node16/nodenext as well as bundler.
const types = join(dist, 'types');
writeFileSync(
  join(root, 'tsconfig.build.json'),
  JSON.stringify({
    extends: './tsconfig.json',
    compilerOptions: { noEmit: false, declaration: true, emitDeclarationOnly: true, outDir: 'dist/types', rootDir: '.', paths: {} },
    include: subpaths.map((s) => s.source),
  }),
);
try {
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
} finally {
  rmSync(join(root, 'tsconfig.build.json'));
}
const declarationFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? declarationFiles(path) : path.endsWith('.d.ts') ? [path] : [];
  });
for (const file of declarationFiles(types)) {
  const text = readFileSync(file, 'utf8').replace(/((?:from|import)\s*\(?\s*['"])(\.{1,2}\/[^'"]+)(['"])/g, (whole, head, spec, tail) => {
    const target = resolve(dirname(file), spec);
    if (existsSync(`${target}.d.ts`)) return `${head}${spec}.js${tail}`;
    if (existsSync(join(target, 'index.d.ts'))) return `${head}${spec}/index.js${tail}`;
    return whole;
  });
  writeFileSync(file, text);
}

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
console.log(`built ${subpaths.length} subpaths and ${HANDLERS.length} handlers into ${relative(process.cwd(), dist) || 'dist'}/`);
