/**
 * How every Lambda bundle is built, in one place: the CDK functions and the cold-start benchmark both read it,
 * so the bundle measured by `npm run bench` is the bundle `cdk deploy` ships.
 * Plain data (no aws-cdk-lib import) so the benchmark stays light.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import type * as esbuild from 'esbuild';
import { packageFile } from './package-root';

const LAMBDA_NODE_TARGET = 'node22';

const stub = (file: string) => packageFile(`lib/bundle-stubs/${file}`, `dist/bundle-stubs/${file}`);

/**
 * ESM output lets esbuild tree-shake the ESM builds of the SDK, MCP SDK, Hono, jose and zod. A few CommonJS
 * dependencies still call `require()` for Node built-ins, which ESM output cannot do without this shim.
 */
const ESM_REQUIRE_BANNER =
  "import { createRequire as __bundleCreateRequire } from 'node:module'; const require = __bundleCreateRequire(import.meta.url);";

export const LambdaBundle = {
  target: LAMBDA_NODE_TARGET,
  format: 'esm' as const,
  platform: 'node' as const,
  minify: true,
  /** Source maps cost bundle bytes and, with --enable-source-maps, cold-start time; stack traces never leave the function anyway. */
  sourcemap: false,
  /** Prefer the ESM entry points: they tree-shake, the CommonJS ones mostly do not. */
  mainFields: ['module', 'main'],
  banner: ESM_REQUIRE_BANNER,
  /**
   * Nothing external: the AWS SDK v3 is bundled (tree-shaken and minified) rather than taken from the runtime,
   * so the deployed code runs the SDK version the tests ran, and a minified single file loads faster than the
   * runtime's many unminified SDK files (see bench/cold-start.ts for the figures).
   */
  external: [] as string[],
  /** Licence comments are kept in node_modules; they add bytes to every cold start. */
  legalComments: 'none' as const,
  /**
   * Modules replaced by stubs that throw when used, each proven unreachable by test/cdk/bundle.test.ts (which serves
   * both protocol eras with the aliased bundle); none of the AWS SDK, which is bundled whole as AWS ships it.
   */
  alias: {
    // The MCP SDK (v2) constructs its inlined Ajv only for a Server given no validator; lambdas/mcp/server.ts gives one.
    '@modelcontextprotocol/server/_shims': stub('mcp-server-shims.mjs'),
    // Imported only by that shim and by nothing else the functions load.
    ajv: stub('ajv.mjs'),
    // Likewise: only Ajv's format plug-in, reached through the stubbed shim.
    'ajv-formats': stub('ajv-formats.mjs'),
    // The MCP SDK converts zod 3 schemas only; every schema here is zod 4 (test: "carries one zod").
    'zod/v3': stub('zod-v3.mjs'),
    // Its zod 3 JSON Schema converter, for the same zod 3 schemas only.
    'zod-to-json-schema': stub('zod-to-json-schema.mjs'),
  } as Record<string, string>,
} as const;

/** The same options as extra esbuild CLI arguments, for the CDK's NodejsFunction (which has no typed prop for them). */
export const lambdaEsbuildArgs = (): Record<string, string | string[]> => ({
  '--legal-comments': LambdaBundle.legalComments,
  '--alias': Object.entries(LambdaBundle.alias).map(([module, replacement]) => `${module}=${replacement}`),
});

/** The functions whose entry ships with the package as it is (the others bundle a team's tools or deliveries). */
export type BuiltInHandler = 'relay';

/** The entry file of a built-in handler: its source in the repository, its build once installed. */
export const handlerEntry = (name: BuiltInHandler) => packageFile(`lambdas/functions/${name}.ts`, `dist/functions/${name}.js`);

/**
 * The esbuild a project bundles its functions with (CDK's NodejsFunction runs the same one), else the one beside this
 * package; undefined where neither is installed.
 */
export function projectEsbuild(projectRoot: string): typeof esbuild | undefined {
  for (const from of [join(projectRoot, 'package.json'), import.meta.url]) {
    try {
      return createRequire(from)('esbuild') as typeof esbuild;
    } catch {
      // Next place.
    }
  }
  return undefined;
}

/** Files beside the sources that change how esbuild resolves or compiles them without being inputs themselves. */
const BUILD_CONFIG_FILES = ['package.json', 'tsconfig.json', 'jsconfig.json'];

/**
 * A content hash of everything a function's bundle is made from, known before it is bundled: CDK's asset hash
 * (`assetHash`, AssetHashType.CUSTOM), so a synth that finds `asset.<hash>` already staged in its cloud assembly
 * skips esbuild instead of bundling again. It covers every file esbuild reaches from `entry` (read from esbuild's
 * metafile, with their contents), the package.json and tsconfig.json files above them, the lock file, esbuild's
 * version and this module's options; CDK adds its own bundling options (the esbuild command, the runtime) on top.
 * A change in any of them is a new hash, so a stale bundle is never reused or deployed.
 *
 * `undefined` where the project's esbuild cannot be loaded or cannot bundle the entry: the function then keeps CDK's
 * default (a hash of the bundle's output), and CDK's own bundling reports the error.
 */
export function bundleSourceHash(entry: string, project: { projectRoot: string; depsLockFilePath: string }, options: unknown): string | undefined {
  const esbuild = projectEsbuild(project.projectRoot);
  if (!esbuild) return undefined;
  let inputs: string[];
  try {
    const result = esbuild.buildSync({
      entryPoints: [entry],
      absWorkingDir: project.projectRoot,
      bundle: true,
      write: false,
      metafile: true,
      outfile: join(project.projectRoot, 'index.mjs'),
      platform: LambdaBundle.platform,
      format: LambdaBundle.format,
      target: LambdaBundle.target,
      mainFields: [...LambdaBundle.mainFields],
      external: [...LambdaBundle.external],
      alias: { ...LambdaBundle.alias },
      logLevel: 'silent',
    });
    inputs = Object.keys(result.metafile?.inputs ?? {});
  } catch {
    return undefined;
  }
  const hash = createHash('sha256');
  const add = (label: string, content: string | Buffer) => hash.update(`${label}\0${createHash('sha256').update(content).digest('hex')}\0`);
  add('idempotent-mcp bundle source v1', JSON.stringify({ esbuild: esbuild.version, bundle: LambdaBundle, options }));
  add(relative(project.projectRoot, project.depsLockFilePath), readFileSync(project.depsLockFilePath));
  const configDirs = new Set<string>();
  for (const input of inputs.sort()) {
    // A namespaced input (`(disabled):fs`) has no file: its name is all there is to it.
    const file = isAbsolute(input) ? input : resolve(project.projectRoot, input);
    if (!existsSync(file)) {
      add(input, '');
      continue;
    }
    add(relative(project.projectRoot, file), readFileSync(file));
    for (let dir = dirname(file); !configDirs.has(dir); dir = dirname(dir)) {
      configDirs.add(dir);
      if (dirname(dir) === dir) break;
    }
  }
  for (const dir of [...configDirs].sort()) {
    for (const name of BUILD_CONFIG_FILES) {
      const file = join(dir, name);
      if (existsSync(file)) add(relative(project.projectRoot, file), readFileSync(file));
    }
  }
  return hash.digest('hex');
}
