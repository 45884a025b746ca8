import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { oncePerRun } from './once-per-run';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Code a test runs in child processes (a CLI, a worker it kills), built once per run into ES module files, as the
 * package ships its bin and Lambda runs its bundle: a child then starts on a fraction of the CPU that tsx needs to
 * load every source file and package through its loader on each start. `entries` maps each output name to its
 * source (relative to the repository); the answer maps it to the built file. Dependencies are bundled (the files sit
 * in the run's scratch folder, where no node_modules resolves); vitest's `inject`, which only starting a stack in a
 * vitest process calls, is left out. Each of the repository's own modules keeps its `import.meta.url` (the source
 * file's): code that finds a file beside it (DynamoDB Local's Jetty configuration) or a package from where it sits
 * (the emulator's jar, through `createRequire`) finds them as it does from the source.
 */
export async function childBundle<Name extends string>(name: string, entries: Record<Name, string>): Promise<Record<Name, string>> {
  const names = Object.keys(entries) as Name[];
  const dir = await oncePerRun(`child-${name}`, async (out) => {
    await build({
      absWorkingDir: repoRoot,
      entryPoints: names.map((entry) => ({ out: entry, in: entries[entry] })),
      outdir: out,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      // Bundled CommonJS packages call require: an ES module has none of its own.
      banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
      plugins: [
        ownModuleUrls,
        {
          name: 'no-vitest',
          setup(b) {
            b.onResolve({ filter: /^vitest$/ }, () => ({ path: 'vitest', namespace: 'no-vitest' }));
            b.onLoad({ filter: /.*/, namespace: 'no-vitest' }, () => ({
              contents: "export const inject = () => { throw new Error('a fixture stack starts only in a vitest process'); };",
            }));
          },
        },
      ],
      logLevel: 'warning',
    });
  });
  return Object.fromEntries(names.map((entry) => [entry, join(dir, `${entry}.mjs`)])) as Record<Name, string>;
}

/** The repository's own TypeScript modules with `import.meta.url` replaced by their source file's URL. */
const ownModuleUrls: Plugin = {
  name: 'own-module-urls',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (args.path.includes('/node_modules/')) return undefined;
      const source = await readFile(args.path, 'utf8');
      if (!source.includes('import.meta.url')) return undefined;
      return { contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)), loader: 'ts' };
    });
  },
};
