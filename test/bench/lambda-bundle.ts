import { readFile } from 'node:fs/promises';
import { basename, dirname, extname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build, type Metafile, type Plugin } from 'esbuild';
import { LambdaBundle, lambdaBuildOptions } from '../../lib/bundling';
import { toolsFunctionEntry } from '../../lib/tools-entry';

/**
 * The MCP function's bundle built as `cdk deploy` builds it (lib/bundling.ts's esbuild options), and what a cold
 * start reads of it: its bytes, gzipped bytes and largest contributors. Used by the cold-start section
 * (test/bench/cold-start.ts), its candidates and the CDK tests that serve requests with the deployed bundle.
 */

export interface BundleFigures {
  bytes: number;
  gzip_bytes: number;
  /** Output bytes per package (node_modules) or project folder, of the files read at start, largest first. */
  largest: Array<{ module: string; bytes: number }>;
}

/**
 * Builds a handler exactly as the stack does (lib/bundling.ts), with optional overrides for the peers and for the
 * candidates measured by test/bench/cold-start-candidates.ts (`splitting`: esbuild's code splitting into the outfile's
 * folder, the entry named as the outfile; `plugins`). The figures count what a cold start reads: the entry file and
 * the chunks it imports statically (a chunk behind `import()` is read when first used).
 */
export async function buildLambdaBundle(
  outfile: string,
  overrides: {
    minify?: boolean;
    external?: string[];
    entry?: string;
    tsconfig?: string;
    splitting?: boolean;
    plugins?: Plugin[];
    format?: 'esm' | 'cjs';
  } = {},
): Promise<{ file: string; figures: BundleFigures; metafile: Metafile }> {
  const entry = overrides.entry ?? toolsFunctionEntry('mcp', fileURLToPath(new URL('../../reference/tools/index.ts', import.meta.url)));
  const result = await build({
    ...lambdaBuildOptions(),
    entryPoints: overrides.splitting ? { [basename(outfile, extname(outfile))]: entry } : [entry],
    format: overrides.format ?? LambdaBundle.format,
    minify: overrides.minify ?? LambdaBundle.minify,
    // CommonJS output has `require` of its own (the banner makes one for ESM output).
    banner: { js: overrides.format === 'cjs' ? '' : LambdaBundle.banner },
    external: overrides.external ?? [...LambdaBundle.external],
    ...(overrides.splitting ? { splitting: true, outdir: dirname(outfile), outExtension: { '.js': extname(outfile) } } : { outfile }),
    ...(overrides.plugins ? { plugins: overrides.plugins } : {}),
    metafile: true,
    logLevel: 'error',
    // A project without the package installed (examples/) resolves its `idempotent-mcp/*` imports through this one.
    ...(overrides.tsconfig ? { tsconfig: overrides.tsconfig } : {}),
  });
  const atStart = readAtStart(result.metafile, outfile);
  const code = Buffer.concat(await Promise.all(atStart.map((file) => readFile(resolve(file)))));
  return {
    file: outfile,
    metafile: result.metafile,
    figures: { bytes: code.length, gzip_bytes: gzipSync(code, { level: 9 }).length, largest: contributors(result.metafile, atStart) },
  };
}

/** The output files a process that imports `outfile` reads before it runs: the entry and its static imports, transitively. */
function readAtStart(metafile: Metafile, outfile: string): string[] {
  const entry = Object.keys(metafile.outputs).find((file) => resolve(file) === resolve(outfile));
  if (!entry) throw new Error(`esbuild wrote no ${outfile}`);
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const { path, kind } of metafile.outputs[file]?.imports ?? [])
      if (kind === 'import-statement' && metafile.outputs[path]) visit(path);
  };
  visit(entry);
  return [...seen];
}

/** Groups the output bytes of `files` by npm package, or by project folder for our own code. */
function contributors(metafile: Metafile, files: string[], top = 10): BundleFigures['largest'] {
  const byModule = new Map<string, number>();
  for (const [file, { bytesInOutput }] of files.flatMap((output) => Object.entries(metafile.outputs[output]!.inputs))) {
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? file.split('/').slice(0, 2).join('/');
    byModule.set(pkg, (byModule.get(pkg) ?? 0) + bytesInOutput);
  }
  return [...byModule]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([module, bytes]) => ({ module, bytes }));
}
