import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, publicSubpaths } from '../../scripts/declarations';
import {
  EXAMPLES,
  exampleProject,
  exampleRun,
  installOf,
  MAX_BUFFER,
  npmEnv,
  packedPackage,
  run,
  setupBlock,
  TYPE_CHECK,
  typeCheckOf,
} from './support';

const examples = readdirSync(EXAMPLES, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);

/**
 * The example whose project also imports every public subpath (everySubpath below): its install has the peers the
 * cdk subpaths' declarations import (aws-cdk-lib, constructs, cdk-nag); the other subpaths need only the package's
 * own dependencies.
 */
const EVERY_SUBPATH_IN = 'cdk-app';
const EVERY_SUBPATH_FILE = 'every-subpath.ts';

/**
 * A file of a team's project that imports every public subpath the installed package exports (its package.json
 * `exports`), each as a namespace of types: type-checked with the project's `skipLibCheck: false`, it checks every
 * declaration file a team can reach, not only those the examples import.
 */
function everySubpath(project: string): { subpaths: string[]; source: string } {
  const installed = JSON.parse(readFileSync(join(project, 'node_modules/idempotent-mcp/package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, unknown>;
  };
  const keys = Object.keys(installed.exports).filter((key) => key !== './package.json');
  const subpaths = keys.map((key) => `${installed.name}${key.slice(1)}`);
  const source = keys.map((key, i) => `export type * as ${key.slice(2).replace(/\W/g, '_')} from '${subpaths[i]}';\n`).join('');
  return { subpaths, source };
}

/**
 * A stranger's view of the package, as docs/toolkit.md tells them to install it: `npm pack` in a clone, then each
 * example's set-up block in a folder beside it, which installs the tarball and exactly the packages the docs list,
 * from the registry (nothing from this repository's node_modules). Then the example's files, its type check with
 * `skipLibCheck: false` and its test; those that need DynamoDB get the test run's DynamoDB Local. The installs and
 * the examples' tests run once per test run (test/package/support.ts): examples/cdk-app's cloud assembly is the one
 * the team-app tests (test/cdk/, test/artifact/) check.
 */
describe('the packed package, installed as docs/toolkit.md says', () => {
  let work: string;
  let files: string[];
  let tarball: string;

  beforeAll(async () => {
    // The examples' projects for their type checks: copies of a few files and links to the run's installs.
    work = mkdtempSync(join(tmpdir(), 'idempotent-mcp-pack-'));
    // The run's one `npm pack` (test/package/api-report.test.ts reports its declarations).
    const packed = await packedPackage();
    files = packed.files;
    tarball = packed.filename;
  }, 600_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('is the file docs/toolkit.md installs', () => {
    const version = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).version;
    expect(tarball).toBe(`idempotent-mcp-${version}.tgz`);
    for (const example of ['own-mcp-server', 'approval-page', 'cdk-app'])
      expect(setupBlock(example)).toContain(`npm install ../idempotent-mcp/${tarball}`);
  });

  // The slow steps (publishing dry, each example's install, type check and test) run at once: npm waits on its cache
  // and the registry while tsc and the examples' tests use the CPU.
  it.concurrent('can be published: npm publish --dry-run is clean', async ({ expect }) => {
    const { stderr } = await run('npm', ['publish', '--dry-run', '--ignore-scripts', '--tag', 'next'], {
      cwd: PROJECT_ROOT,
      env: npmEnv,
      maxBuffer: MAX_BUFFER,
    });
    // npm warns when it has to correct the manifest (a bin path, a repository field) or drops a file it was told to ship.
    expect(stderr.split('\n').filter((line) => /npm warn/i.test(line) && !/dry-run|Unknown (user|env) config/i.test(line))).toEqual([]);
  }, 300_000);

  it('finds every example a project of its own, with a test script', () => {
    for (const example of examples)
      expect(JSON.parse(readFileSync(join(EXAMPLES, example, 'package.json'), 'utf8')).scripts?.test, example).toBeTruthy();
  });

  it('ships the build, README, LICENSE and the docs the bins name only: no sources, tests or local state', () => {
    expect(files).toContain('dist/engine.js');
    expect(files).toContain('dist/types/exports/engine.d.ts');
    expect(files).toContain('LICENSE');
    // The docs `idempotent-mcp gateway --help` names (test/gateway/local-tenants.test.ts), as package.json `files` lists them.
    const docs = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { files: string[] }).files.filter((f) =>
      f.startsWith('docs/'),
    );
    expect(files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE', ...docs].includes(f))).toEqual([]);
  });

  const tsconfigOf = (example: string) =>
    JSON.parse(readFileSync(join(EXAMPLES, example, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
      include?: string[];
    };

  /** Each example's project for its type check, in this file's folder. */
  const projects = new Map<string, Promise<string>>();
  const projectOf = (example: string): Promise<string> => {
    const made = projects.get(example) ?? exampleProject(example, work);
    projects.set(example, made);
    return made;
  };

  /**
   * Examples that share an install and whose tsconfig.json is the same (the two MCP servers) are type-checked as one
   * program: the first's tsconfig, extended to include the others' files. Each example's program would be the same
   * options over the same installed declarations; one program reads and checks those declarations once instead of
   * once per example. The rest of each example's script (its test) runs once per test run (exampleRun). The program
   * of EVERY_SUBPATH_IN also holds the file that imports every public subpath.
   */
  const typeCheckGroup = (example: string) =>
    examples.filter(
      (other) =>
        typeCheckOf(other) === TYPE_CHECK &&
        installOf(setupBlock(other)) === installOf(setupBlock(example)) &&
        JSON.stringify(tsconfigOf(other)) === JSON.stringify(tsconfigOf(example)),
    );
  const typeChecks = new Map<string, Promise<void>>();
  function typeChecked(example: string): Promise<void> {
    const group = typeCheckGroup(example);
    const key = group.join(' ');
    const checked =
      typeChecks.get(key) ??
      Promise.all(group.map(projectOf)).then(async ([first, ...others]) => {
        const include = [first!, ...others].flatMap((project, i) =>
          (tsconfigOf(group[i]!).include ?? ['**/*']).map((pattern) => join(relative(first!, project), pattern)),
        );
        const what = [`examples/${group.join(', examples/')}`];
        if (group.includes(EVERY_SUBPATH_IN)) {
          writeFileSync(join(first!, EVERY_SUBPATH_FILE), everySubpath(first!).source);
          include.push(EVERY_SUBPATH_FILE);
          what.push(`${EVERY_SUBPATH_FILE} (it imports every public subpath of the installed package)`);
        }
        const tsconfig = 'tsconfig.examples.json';
        writeFileSync(join(first!, tsconfig), JSON.stringify({ extends: './tsconfig.json', include }));
        // TypeScript 7 checks on several threads by default, each with its own copy of the work; beside the rest of
        // the suite, which keeps both cores busy, one thread does the same check on less CPU.
        const { version } = JSON.parse(readFileSync(join(first!, 'node_modules/typescript/package.json'), 'utf8')) as { version: string };
        const threads = Number(version.split('.')[0]) >= 7 ? ['--singleThreaded'] : [];
        await run('tsc', ['--noEmit', '-p', tsconfig, ...threads], {
          cwd: first!,
          env: { ...npmEnv, PATH: `${join(first!, 'node_modules/.bin')}:${process.env.PATH}` },
          timeout: 480_000,
          maxBuffer: MAX_BUFFER,
        }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
          throw new Error(
            `tsc --noEmit failed for ${what.join(' and ')}, one program with each example's tsconfig.json:\n${err.stdout ?? ''}\n${err.stderr ?? err.message}`,
          );
        });
      });
    typeChecks.set(key, checked);
    return checked;
  }

  it.for(examples)(
    'runs examples/%s, set up as docs/toolkit.md says',
    { concurrent: true, timeout: 900_000 },
    async (example, { expect }) => {
      const project = await projectOf(example);
      expect(JSON.parse(readFileSync(join(project, 'tsconfig.json'), 'utf8')).compilerOptions.skipLibCheck).toBe(false);
      const [, result] = await Promise.all([typeCheckOf(example) === TYPE_CHECK ? typeChecked(example) : undefined, exampleRun(example)]);
      expect(result.stdout).toMatch(/passed/);
    },
  );

  it("type-checks every public subpath of the installed package in a team's strict project (skipLibCheck: false)", {
    concurrent: true,
    timeout: 900_000,
  }, async ({ expect }) => {
    const project = await projectOf(EVERY_SUBPATH_IN);
    expect(JSON.parse(readFileSync(join(project, 'tsconfig.json'), 'utf8')).compilerOptions.skipLibCheck).toBe(false);
    // What the package exports is what the sources declare public, every one of it.
    expect(everySubpath(project).subpaths.sort()).toEqual(
      publicSubpaths()
        .map((s) => s.name)
        .sort(),
    );
    await typeChecked(EVERY_SUBPATH_IN);
  });
});
