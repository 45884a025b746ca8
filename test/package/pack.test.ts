import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/declarations';
import { MAX_BUFFER, npmEnv, packedPackage, run } from './support';

const EXAMPLES = join(PROJECT_ROOT, 'examples');
const examples = readdirSync(EXAMPLES, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);

/**
 * docs/toolkit.md's set-up block for an example: the first `sh` block before the example's first file. It is run
 * as printed, in an empty folder that holds the packed package where docs/toolkit.md#install puts it.
 */
function setupBlock(example: string): string {
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
const installOf = (block: string) => block.replace(/^mkdir (\S+) && cd \1\n/m, '');

/**
 * A stranger's view of the package, as docs/toolkit.md tells them to install it: `npm pack` in a clone, then each
 * example's set-up block in a folder beside it, which installs the tarball and exactly the packages the docs list,
 * from the registry (nothing from this repository's node_modules). Then the example's files, its type check with
 * `skipLibCheck: false` and its test; those that need DynamoDB get the test run's DynamoDB Local.
 */
describe('the packed package, installed as docs/toolkit.md says', () => {
  let work: string;
  let files: string[];
  let tarball: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'idempotent-mcp-pack-'));
    const clone = join(work, 'idempotent-mcp');
    mkdirSync(clone);
    // The run's one `npm pack` (test/package/api-report.test.ts reports its declarations).
    const packed = await packedPackage();
    copyFileSync(packed.tarball, join(clone, packed.filename));
    files = packed.files;
    tarball = packed.filename;
  }, 600_000);

  // The examples' installs are hundreds of megabytes of files: on a loaded machine their removal outlasts the default minute.
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  }, 300_000);

  it('is the file docs/toolkit.md installs', () => {
    const version = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).version;
    expect(tarball).toBe(`idempotent-mcp-${version}.tgz`);
    for (const example of ['own-mcp-server', 'approval-page', 'cdk-app']) expect(setupBlock(example)).toContain(`npm install ../idempotent-mcp/${tarball}`);
  });

  // The slow steps (publishing dry, each example's install, type check and test) run at once: npm waits on its cache
  // and the registry while tsc and the examples' tests use the CPU.
  it.concurrent('can be published: npm publish --dry-run is clean', async ({ expect }) => {
    const { stderr } = await run('npm', ['publish', '--dry-run', '--ignore-scripts', '--tag', 'next'], { cwd: PROJECT_ROOT, env: npmEnv, maxBuffer: MAX_BUFFER });
    // npm warns when it has to correct the manifest (a bin path, a repository field) or drops a file it was told to ship.
    expect(stderr.split('\n').filter((line) => /npm warn/i.test(line) && !/dry-run|Unknown (user|env) config/i.test(line))).toEqual([]);
  }, 300_000);

  it('finds every example a project of its own, with a test script', () => {
    for (const example of examples) expect(JSON.parse(readFileSync(join(EXAMPLES, example, 'package.json'), 'utf8')).scripts?.test, example).toBeTruthy();
  });

  it('ships the build, README and LICENSE only: no sources, tests or local state', () => {
    expect(files).toContain('dist/engine.js');
    expect(files).toContain('dist/types/exports/engine.d.ts');
    expect(files).toContain('LICENSE');
    expect(files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(f))).toEqual([]);
  });

  /**
   * Examples whose set-up blocks install the same packages (all but the folder's name) share one install, the first
   * one's, run as printed: the second's folder gets its package.json, its lock file and its node_modules (a link).
   */
  const installs = new Map<string, Promise<string>>();
  async function setUp(example: string): Promise<string> {
    const block = setupBlock(example);
    const project = join(work, projectFolderOf(block));
    const installed = installs.get(installOf(block));
    if (installed) {
      const first = await installed;
      mkdirSync(project);
      for (const name of ['package.json', 'package-lock.json']) copyFileSync(join(first, name), join(project, name));
      symlinkSync(join(first, 'node_modules'), join(project, 'node_modules'));
      return project;
    }
    const running = run('sh', ['-euc', block], { cwd: work, env: npmEnv, timeout: 480_000, maxBuffer: MAX_BUFFER }).then(
      () => project,
      (err: { stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`docs/toolkit.md's set-up block for examples/${example} failed:\n${block}\n${err.stderr ?? err.message}`);
      },
    );
    installs.set(installOf(block), running);
    return running;
  }

  /** The type check every example's test script starts with, as a team runs it in its folder. */
  const TYPE_CHECK = 'tsc --noEmit -p . && ';
  const scriptOf = (example: string) => JSON.parse(readFileSync(join(EXAMPLES, example, 'package.json'), 'utf8')).scripts.test as string;
  const tsconfigOf = (example: string) => JSON.parse(readFileSync(join(EXAMPLES, example, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown>; include?: string[] };

  /** Each example's project: installed (setUp) and its files copied in. */
  const projects = new Map<string, Promise<string>>();
  const projectOf = (example: string): Promise<string> => {
    const made = projects.get(example) ?? setUp(example).then((project) => {
      const source = join(EXAMPLES, example);
      for (const name of readdirSync(source)) if (name !== 'package.json' && name !== 'node_modules') cpSync(join(source, name), join(project, name), { recursive: true });
      return project;
    });
    projects.set(example, made);
    return made;
  };

  /**
   * Examples that share an install and whose tsconfig.json is the same (the two MCP servers) are type-checked as one
   * program: the first's tsconfig, extended to include the others' files. Each example's program would be the same
   * options over the same installed declarations; one program reads and checks those declarations once instead of
   * once per example. The rest of each example's script (its test) then runs in its own folder.
   */
  const typeCheckGroup = (example: string) =>
    examples.filter((other) => scriptOf(other).startsWith(TYPE_CHECK) && installOf(setupBlock(other)) === installOf(setupBlock(example)) && JSON.stringify(tsconfigOf(other)) === JSON.stringify(tsconfigOf(example)));
  const typeChecks = new Map<string, Promise<void>>();
  function typeChecked(example: string): Promise<void> {
    const group = typeCheckGroup(example);
    const key = group.join(' ');
    const checked =
      typeChecks.get(key) ??
      Promise.all(group.map(projectOf)).then(async ([first, ...others]) => {
        const include = [first!, ...others].flatMap((project, i) => (tsconfigOf(group[i]!).include ?? ['**/*']).map((pattern) => join(relative(first!, project), pattern)));
        const tsconfig = group.length === 1 ? 'tsconfig.json' : 'tsconfig.examples.json';
        if (group.length > 1) writeFileSync(join(first!, tsconfig), JSON.stringify({ extends: './tsconfig.json', include }));
        await run('tsc', ['--noEmit', '-p', tsconfig], { cwd: first!, env: { ...npmEnv, PATH: `${join(first!, 'node_modules/.bin')}:${process.env.PATH}` }, timeout: 480_000, maxBuffer: MAX_BUFFER }).catch(
          (err: { stdout?: string; stderr?: string; message: string }) => {
            throw new Error(`tsc --noEmit failed for examples/${group.join(', examples/')} (one program, each example's tsconfig.json):\n${err.stdout ?? ''}\n${err.stderr ?? err.message}`);
          },
        );
      });
    typeChecks.set(key, checked);
    return checked;
  }

  it.for(examples)('runs examples/%s, set up as docs/toolkit.md says', { concurrent: true, timeout: 900_000 }, async (example, { expect }) => {
    const project = await projectOf(example);
    expect(JSON.parse(readFileSync(join(project, 'tsconfig.json'), 'utf8')).compilerOptions.skipLibCheck).toBe(false);
    const script = scriptOf(example);
    let test = script;
    if (script.startsWith(TYPE_CHECK)) {
      await typeChecked(example);
      test = script.slice(TYPE_CHECK.length);
    }
    const env = { ...npmEnv, DYNAMODB_ENDPOINT: inject('dynamodbEndpoint'), PATH: `${join(project, 'node_modules/.bin')}:${process.env.PATH}` };
    const result = await run('sh', ['-euc', test], { cwd: project, env, timeout: 480_000, maxBuffer: MAX_BUFFER }).catch(
      (err: { stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`examples/${example} failed (${err.message.split('\n')[0]}):\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
      },
    );
    expect(result.stdout).toMatch(/passed/);
  });
});
