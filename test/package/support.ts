import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/declarations';
import { oncePerRun } from '../support/once-per-run';

export const run = promisify(execFile);
export const MAX_BUFFER = 64 * 1024 * 1024;

const NPM_SETTINGS = {
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
  // The registry's packages come from npm's cache when it has them (`npm ci` here filled it).
  npm_config_prefer_offline: 'true',
};

export const npmEnv = { ...process.env, ...NPM_SETTINGS };

/** The environment of a machine with no AWS account: no credentials, no instance metadata, and no Docker. */
export function offlineEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('AWS_') && !key.startsWith('CDK_')) env[key] = value;
  return {
    ...env,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
    AWS_CONFIG_FILE: '/nonexistent/config',
    // Any attempt to bundle in a container would run this and fail.
    CDK_DOCKER: '/nonexistent/docker',
    ...extra,
  };
}

export interface PackedPackage {
  /** The tarball's path (in the run's folder: read it, copy it, never change it). */
  readonly tarball: string;
  /** Its file name, as `npm pack` named it. */
  readonly filename: string;
  /** The files it holds, as `npm pack --json` lists them. */
  readonly files: string[];
}

/**
 * `npm pack` of this repository (its `prepack` runs `npm run build`: esbuild, then tsc emitting the declarations),
 * once per test run: the examples install the tarball as a stranger does (exampleRun below), and
 * test/package/api-report.test.ts reports the declarations it ships.
 */
export async function packedPackage(): Promise<PackedPackage> {
  const dir = await oncePerRun('packed-package', async (out) => {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', out], {
      cwd: PROJECT_ROOT,
      env: npmEnv,
      maxBuffer: MAX_BUFFER,
    });
    writeFileSync(join(out, 'pack.json'), stdout.slice(stdout.indexOf('[')));
  });
  const [packed] = JSON.parse(readFileSync(join(dir, 'pack.json'), 'utf8')) as Array<{ filename: string; files: Array<{ path: string }> }>;
  return { tarball: join(dir, packed!.filename), filename: packed!.filename, files: packed!.files.map((f) => f.path) };
}

export const EXAMPLES = join(PROJECT_ROOT, 'examples');

/**
 * docs/toolkit.md's set-up block for an example: the first `sh` block before the example's first file. It is run
 * as printed, in an empty folder that holds the packed package where docs/toolkit.md#install puts it.
 */
export function setupBlock(example: string): string {
  const doc = readFileSync(join(PROJECT_ROOT, 'docs/toolkit.md'), 'utf8');
  const at = doc.indexOf(`<!-- file: examples/${example}/`);
  if (at < 0) throw new Error(`docs/toolkit.md shows no file of examples/${example}`);
  const blocks = [...doc.slice(0, at).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.includes('npm init'));
  const block = blocks.at(-1);
  if (!block) throw new Error(`docs/toolkit.md has no set-up block before examples/${example}`);
  return block;
}

/** The project folder a set-up block makes (`mkdir my-mcp-server && cd my-mcp-server`). */
const projectFolderOf = (block: string) => /^mkdir (\S+)/m.exec(block)?.[1] ?? '.';

/** What a set-up block installs: the block without the line that makes and enters its folder. */
export const installOf = (block: string) => block.replace(/^mkdir (\S+) && cd \1\n/m, '');

/** The file that names the project folder in an install's folder. */
const PROJECT_FOLDER = 'project-folder.txt';

/**
 * An example's set-up block run as printed, once per test run, in a folder that holds the packed package where
 * docs/toolkit.md#install puts it: it installs the tarball and exactly the packages the docs list, from the registry
 * (nothing from this repository's node_modules). Examples whose blocks install the same packages (all but the
 * folder's name) share the first one's install. Returns the project folder the block made: read it, never write it.
 */
async function installed(example: string): Promise<string> {
  const block = setupBlock(example);
  const dir = await oncePerRun(
    `example-install-${createHash('sha256').update(installOf(block)).digest('hex').slice(0, 12)}`,
    async (out) => {
      const packed = await packedPackage();
      mkdirSync(join(out, 'idempotent-mcp'));
      copyFileSync(packed.tarball, join(out, 'idempotent-mcp', packed.filename));
      await run('sh', ['-euc', block], { cwd: out, env: npmEnv, timeout: 480_000, maxBuffer: MAX_BUFFER }).catch(
        (err: { stderr?: string; message: string }) => {
          throw new Error(`docs/toolkit.md's set-up block for examples/${example} failed:\n${block}\n${err.stderr ?? err.message}`);
        },
      );
      writeFileSync(join(out, PROJECT_FOLDER), projectFolderOf(block));
    },
  );
  return join(dir, readFileSync(join(dir, PROJECT_FOLDER), 'utf8'));
}

/**
 * An example's project made in `dir` as a team has it after docs/toolkit.md: what its set-up block made (the
 * install, shared, see installed), then the example's files copied in. Its node_modules is a folder of links to
 * the install's packages: what the project writes there (the toolkit's cache of its tools check) stays its own.
 */
export async function exampleProject(example: string, dir: string): Promise<string> {
  const install = await installed(example);
  const project = join(dir, projectFolderOf(setupBlock(example)));
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  for (const name of readdirSync(install))
    if (name !== 'node_modules') cpSync(join(install, name), join(project, name), { recursive: true });
  for (const name of readdirSync(join(install, 'node_modules')))
    symlinkSync(join(install, 'node_modules', name), join(project, 'node_modules', name));
  const source = join(EXAMPLES, example);
  for (const name of readdirSync(source))
    if (name !== 'package.json' && name !== 'node_modules') cpSync(join(source, name), join(project, name), { recursive: true });
  return project;
}

/** Every example's `typecheck` script, as docs/toolkit.md's set-up writes it (`npm run typecheck`). */
export const TYPE_CHECK = 'tsc --noEmit -p .';
const scriptsOf = (example: string) =>
  JSON.parse(readFileSync(join(EXAMPLES, example, 'package.json'), 'utf8')).scripts as Record<string, string>;
const scriptOf = (example: string) => scriptsOf(example).test!;
export const typeCheckOf = (example: string) => scriptsOf(example).typecheck;

/**
 * An example's test script without its type check (test/package/pack.test.ts runs that, several examples as one
 * program), run once per test run in the example's project (exampleProject), offline (offlineEnv) with the run's
 * DynamoDB Local. A CDK app writes its cloud assembly into the run's folder (CDK_OUTDIR): for examples/cdk-app,
 * test/package/pack.test.ts checks what it printed, test/cdk/team-app.test.ts reads the assembly and
 * test/artifact/team-app.test.ts deploys it. Read the folder, never write it.
 */
export async function exampleRun(example: string): Promise<{ stdout: string; cloudAssembly: string }> {
  const script = scriptOf(example);
  const test = script;
  const dir = await oncePerRun(`example-run-${example}`, async (out) => {
    const project = await exampleProject(example, out);
    const env = offlineEnv({
      ...NPM_SETTINGS,
      DYNAMODB_ENDPOINT: inject('dynamodbEndpoint'),
      CDK_OUTDIR: join(out, 'cdk.out'),
      PATH: `${join(project, 'node_modules/.bin')}:${process.env.PATH}`,
    });
    const { stdout } = await run('sh', ['-euc', test], { cwd: project, env, timeout: 480_000, maxBuffer: MAX_BUFFER }).catch(
      (err: { stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`examples/${example} failed (${err.message.split('\n')[0]}):\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
      },
    );
    writeFileSync(join(out, 'stdout.txt'), stdout);
  });
  return { stdout: readFileSync(join(dir, 'stdout.txt'), 'utf8'), cloudAssembly: join(dir, 'cdk.out') };
}
