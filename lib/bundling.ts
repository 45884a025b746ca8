/**
 * How every Lambda bundle is built, in one place: the CDK functions and the cold-start benchmark both read it,
 * so the bundle measured by `npm run bench` is the bundle `cdk deploy` ships.
 * Plain data (no aws-cdk-lib import) so the benchmark stays light.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
   * runtime's many unminified SDK files (see test/bench/cold-start.ts for the figures).
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

/** LambdaBundle as esbuild's options: the functions' build (lambdaBuild) and the cold-start benchmark's. */
export const lambdaBuildOptions = () =>
  ({
    bundle: true,
    platform: LambdaBundle.platform,
    format: LambdaBundle.format,
    target: LambdaBundle.target,
    minify: LambdaBundle.minify,
    sourcemap: LambdaBundle.sourcemap,
    mainFields: [...LambdaBundle.mainFields],
    banner: { js: LambdaBundle.banner },
    external: [...LambdaBundle.external],
    alias: { ...LambdaBundle.alias },
    legalComments: LambdaBundle.legalComments,
  }) satisfies esbuild.BuildOptions;

/** The functions whose entry ships with the package as it is (the others bundle a team's tools or deliveries). */
export type BuiltInHandler = 'relay';

/** The entry file of a built-in handler: its source in the repository, its build once installed. */
export const handlerEntry = (name: BuiltInHandler) => packageFile(`lambdas/functions/${name}.ts`, `dist/functions/${name}.js`);

/**
 * The esbuild a project bundles its functions with, else the one beside this package; undefined where neither is installed.
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

/** The bundle's file name, as CDK's NodejsFunction names an ESM bundle: the handler is `index.handler`. */
export const LAMBDA_BUNDLE_FILE = 'index.mjs';

/** A function's project: where esbuild runs (the entry must be inside it) and its lock file. */
export interface BundleProject {
  readonly projectRoot: string;
  readonly depsLockFilePath: string;
}

/** A function bundled once, in this process: its asset hash and a way to write the bundle where CDK stages it. */
export interface LambdaBuild {
  /**
   * A content hash of everything the bundle is made from (see lambdaBuild); undefined where the bundle could not be
   * built, and `write` then throws why.
   */
  readonly hash: string | undefined;
  /** Writes the bundle (`index.mjs`) into `outputDir`. */
  write(outputDir: string): void;
}

/**
 * Bundles a function with the project's esbuild, in this process (no `npx`, no shell, no Docker), once: the same build
 * gives the bundle and, from its metafile, the asset hash (`assetHash`, AssetHashType.CUSTOM), known before CDK
 * stages the asset, so a synth that finds `asset.<hash>` already in its cloud assembly writes nothing again.
 *
 * The hash covers every file esbuild reached from `entry` (with their contents), the package.json and tsconfig.json
 * files above them, the lock file, esbuild's version, this module's options and `options` (the runtime). A change in
 * any of them is a new hash, so a stale bundle is never reused or deployed.
 *
 * Where the project has no esbuild, or esbuild cannot bundle the entry, `hash` is undefined and `write` throws: CDK
 * reports the error when it stages the asset (a synth that skips bundling, `cdk synth --exclusively`, is not stopped).
 */
export function lambdaBuild(entry: string, project: BundleProject, options: unknown): LambdaBuild {
  const failed = (error: Error): LambdaBuild => ({
    hash: undefined,
    write: () => {
      throw error;
    },
  });
  const esbuild = projectEsbuild(project.projectRoot);
  if (!esbuild) {
    // Docker bundling is not supported (docs/deploy.md): say what to install instead of falling back to it.
    return failed(
      new Error(
        `cannot bundle ${entry}: the functions are bundled by the project's esbuild, which is not installed in ${project.projectRoot}: npm install -D esbuild`,
      ),
    );
  }
  let result: esbuild.BuildResult<{ metafile: true; write: false }>;
  const outfile = join(project.projectRoot, LAMBDA_BUNDLE_FILE);
  try {
    result = esbuild.buildSync({
      ...lambdaBuildOptions(),
      entryPoints: [entry],
      absWorkingDir: project.projectRoot,
      write: false,
      metafile: true,
      outfile,
      // Nothing is written there (CDK stages the bundle through `write`): an input of that name must not stop the build.
      allowOverwrite: true,
      // esbuild's size table would fill `npm run synth --quiet`; warnings and errors still show.
      logLevel: 'warning',
    });
  } catch (error) {
    return failed(error instanceof Error ? error : new Error(String(error)));
  }
  const hash = createHash('sha256');
  const add = (label: string, content: string | Uint8Array) =>
    hash.update(`${label}\0${createHash('sha256').update(content).digest('hex')}\0`);
  add(
    'idempotent-mcp bundle source v2',
    JSON.stringify({ esbuild: esbuild.version, bundle: LambdaBundle, file: LAMBDA_BUNDLE_FILE, options }),
  );
  add(relative(project.projectRoot, project.depsLockFilePath), readFileSync(project.depsLockFilePath));
  const configDirs = new Set<string>();
  for (const input of Object.keys(result.metafile.inputs).sort()) {
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
  const files = result.outputFiles;
  return {
    hash: hash.digest('hex'),
    write: (outputDir) => {
      for (const file of files) {
        const target = join(outputDir, relative(dirname(outfile), file.path));
        mkdirSync(dirname(target), { recursive: true });
        writeFileSync(target, file.contents);
      }
    },
  };
}
