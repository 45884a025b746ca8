/**
 * The package's type declarations, written once for `npm run build` (dist/types) and for the API reports
 * (`npm run api`, test/package/api-report.test.ts): tsc from the public entry files, then relative specifiers made
 * explicit (`./engine.js`), so they resolve under moduleResolution node16/nodenext as well as bundler.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export const PROJECT_ROOT = resolve(import.meta.dirname, '..');
export const PACKAGE = 'idempotent-mcp';

/**
 * The project's compiler, from the project root: TypeScript 7 (the native port; npm's `typescript@7` installed as
 * `typescript-go`), which does the same checks for a fraction of 5.9's CPU. The `typescript` package (5.9) stays for
 * the tools that load TypeScript's JavaScript API, which 7 does not ship (madge's parser, in test/unit/).
 */
export const TSC = 'node_modules/typescript-go/bin/tsc';

export interface Subpath {
  /** `idempotent-mcp/engine/testing` */
  readonly name: string;
  /** `engine/testing` (dist/engine/testing.js) */
  readonly out: string;
  /** `exports/engine-testing.ts` */
  readonly source: string;
}

/**
 * The naming rule of the entry points: subpath `idempotent-mcp/<a>/<b>` is the file `exports/<a>-<b>.ts`, its API
 * report `exports/<a>-<b>.api.md`, its build `dist/<a>/<b>.js`.
 */
export const entryFileOf = (out: string) => `exports/${out.replaceAll('/', '-')}.ts`;

/** The public subpaths, from tsconfig.json's `paths`: the one map tsc, tsx, vitest and package.json's `exports` share. */
export function publicSubpaths(root = PROJECT_ROOT): Subpath[] {
  const paths: Record<string, [string]> = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')).compilerOptions.paths;
  return Object.entries(paths).map(([name, [source]]) => {
    const out = name.slice(PACKAGE.length + 1);
    const file = source.replace(/^\.\//, '');
    if (file !== entryFileOf(out))
      throw new Error(`tsconfig.json paths["${name}"] must be ./${entryFileOf(out)}: a subpath's entry file is named after it`);
    return { name, out, source: file };
  });
}

/**
 * Writes the declarations of every public subpath under `outDir` (mirroring the source tree); returns the files.
 * Always type-checked: tsc's `noCheck` orders some unions and object members otherwise, and the API reports must
 * read as the shipped declarations do.
 */
export function emitDeclarations(outDir: string, root = PROJECT_ROOT): string[] {
  const config = join(root, `tsconfig.declarations-${process.pid}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      extends: './tsconfig.json',
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        outDir: relative(root, outDir),
        rootDir: '.',
        paths: {},
      },
      include: publicSubpaths(root).map((s) => s.source),
    }),
  );
  try {
    execFileSync(process.execPath, [join(root, TSC), '-p', config], { cwd: root, stdio: 'inherit' });
  } finally {
    rmSync(config);
  }
  const files = declarationFiles(outDir);
  for (const file of files) {
    const text = readFileSync(file, 'utf8').replace(/((?:from|import)\s*\(?\s*['"])(\.{1,2}\/[^'"]+)(['"])/g, (whole, head, spec, tail) => {
      const target = resolve(dirname(file), spec);
      if (existsSync(`${target}.d.ts`)) return `${head}${spec}.js${tail}`;
      if (existsSync(join(target, 'index.d.ts'))) return `${head}${spec}/index.js${tail}`;
      return whole;
    });
    writeFileSync(file, text);
  }
  return files;
}

function declarationFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? declarationFiles(path) : path.endsWith('.d.ts') ? [path] : [];
  });
}
