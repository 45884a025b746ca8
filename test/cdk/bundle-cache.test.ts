import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssetStaging, Duration, Stack } from 'aws-cdk-lib';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { lambdaBuild } from '../../lib/bundling';
import { PROJECT_ROOT, ServiceFunction } from '../../lib/constructs/service-function';
import { projectOf } from '../../lib/package-root';
import { templateApp } from './support';

/**
 * A function's asset hash is known before it is bundled (lib/bundling.ts, lambdaBuild), so a synth into a cloud
 * assembly that already holds the bundle skips esbuild. A hash that missed a change would reuse, and deploy, an old
 * bundle: every change to what the bundle is made from must be a new hash.
 */
describe('the bundle hash of a function', () => {
  /** A small project inside this repository (so esbuild resolves its packages here), with its own lock file. */
  const root = (() => {
    const scratch = join(PROJECT_ROOT, '.scratch');
    mkdirSync(scratch, { recursive: true });
    return mkdtempSync(join(scratch, 'bundle-hash-'));
  })();
  const project = { projectRoot: root, depsLockFilePath: join(root, 'package-lock.json') };
  const write = (name: string, text: string) => {
    mkdirSync(join(root, name, '..'), { recursive: true });
    writeFileSync(join(root, name), text);
  };
  const hash = () => lambdaBuild(join(root, 'src/entry.ts'), project, { runtime: 'nodejs22.x' }).hash;

  beforeEach(() => {
    rmSync(root, { recursive: true, force: true });
    write('package-lock.json', JSON.stringify({ name: 'team', lockfileVersion: 3, packages: {} }));
    write('package.json', JSON.stringify({ name: 'team', private: true }));
    write('src/entry.ts', "import { greet } from './reached';\nexport const handler = async () => greet('a');\n");
    write('src/reached.ts', "import { z } from 'zod';\nexport const greet = (name: string) => z.string().parse(`hello ${name}`);\n");
    write('src/unreached.ts', 'export const unused = 1;\n');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('is the same for the same sources, and changes when a file the entry reaches changes', () => {
    const first = hash();
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(hash()).toBe(first);
    write('src/reached.ts', "import { z } from 'zod';\nexport const greet = (name: string) => z.string().parse(`hi ${name}`);\n");
    const changed = hash();
    expect(changed).not.toBe(first);
    // Back to the first content: back to the first hash (the hash is of contents, not of times).
    write('src/reached.ts', "import { z } from 'zod';\nexport const greet = (name: string) => z.string().parse(`hello ${name}`);\n");
    expect(hash()).toBe(first);
    // A file nothing imports is no part of the bundle.
    write('src/unreached.ts', 'export const unused = 2;\n');
    expect(hash()).toBe(first);
  });

  it('changes with a newly reached file, the lock file, a tsconfig.json or package.json above a source, and the options', () => {
    const first = hash();
    const changes: Array<[string, () => void]> = [
      [
        'a new import',
        () =>
          write(
            'src/entry.ts',
            "import { greet } from './reached';\nimport { unused } from './unreached';\nexport const handler = async () => greet(String(unused));\n",
          ),
      ],
      [
        'the lock file',
        () => write('package-lock.json', JSON.stringify({ name: 'team', lockfileVersion: 3, packages: { '': { version: '1.0.1' } } })),
      ],
      ['a tsconfig.json', () => write('src/tsconfig.json', JSON.stringify({ compilerOptions: { useDefineForClassFields: false } }))],
      ['a package.json', () => write('package.json', JSON.stringify({ name: 'team', private: true, sideEffects: false }))],
    ];
    const seen = new Set([first]);
    for (const [what, change] of changes) {
      change();
      const next = hash();
      expect(seen.has(next!), what).toBe(false);
      seen.add(next!);
    }
    expect(lambdaBuild(join(root, 'src/entry.ts'), project, { runtime: 'nodejs24.x' }).hash).not.toBe(hash());
  });

  it('reaches into the packages it imports: a changed file of a package counts, with the lock file unchanged', () => {
    write('node_modules/left-pad-team/package.json', JSON.stringify({ name: 'left-pad-team', version: '1.0.0', main: 'index.js' }));
    write('node_modules/left-pad-team/index.js', "exports.pad = (s) => ' ' + s;\n");
    write('src/reached.ts', "import { pad } from 'left-pad-team';\nexport const greet = (name: string) => pad(name);\n");
    const first = hash();
    write('node_modules/left-pad-team/index.js', "exports.pad = (s) => '  ' + s;\n");
    expect(hash()).not.toBe(first);
  });

  it('is none where esbuild cannot bundle the entry (CDK then bundles and reports the error itself)', () => {
    write('src/entry.ts', "import { missing } from './nowhere';\nexport const handler = missing;\n");
    expect(hash()).toBeUndefined();
  });
});

describe('a synth into a cloud assembly that holds the bundle', () => {
  /** A function's entry inside this repository (its project is the repository: esbuild runs from here). */
  const dir = (() => {
    const scratch = join(PROJECT_ROOT, '.scratch');
    mkdirSync(scratch, { recursive: true });
    return mkdtempSync(join(scratch, 'bundle-reuse-'));
  })();
  const outdir = mkdtempSync(join(tmpdir(), 'bundle-reuse-out-'));
  const entry = join(dir, 'entry.ts');
  const reached = join(dir, 'reached.ts');
  let bundled: string[] = [];

  beforeEach(() => {
    bundled = [];
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      if (String(chunk).startsWith('Bundling asset ')) bundled.push(String(chunk));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    });
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(outdir, { recursive: true, force: true });
  });

  /** One function synthesized into `outdir` with bundling on: its asset hash and its bundle as staged. */
  const synth = () => {
    // As a new `cdk synth` process would: without CDK's in-process cache of staged assets, only the cloud assembly
    // on disk can spare the bundling.
    AssetStaging.clearAssetHashCache();
    const app = templateApp({}, { bundle: true, outdir });
    const stack = new Stack(app, 'Cached');
    new ServiceFunction(stack, 'Fn', { entry, description: 'cache test', timeout: Duration.seconds(3) });
    const assembly = app.synth();
    const template = assembly.getStackByName('Cached').template as {
      Resources: Record<string, { Type: string; Properties: { Code: { S3Key: string } } }>;
    };
    const fn = Object.values(template.Resources).find((r) => r.Type === 'AWS::Lambda::Function')!;
    const hash = fn.Properties.Code.S3Key.replace(/\.zip$/, '');
    return { hash, code: readFileSync(join(outdir, `asset.${hash}`, 'index.mjs'), 'utf8') };
  };

  it('takes the staged bundle when the sources are unchanged, and bundles anew (a new hash) when a reached file changed', () => {
    expect(projectOf(entry).projectRoot).toBe(PROJECT_ROOT);
    writeFileSync(entry, "import { word } from './reached';\nexport const handler = async () => word;\n");
    writeFileSync(reached, "export const word = 'first-version';\n");
    const first = synth();
    expect(bundled).toHaveLength(1);
    expect(first.code).toContain('first-version');

    // The same sources: the bundle staged by the first synth is taken, esbuild does not run.
    const again = synth();
    expect(again.hash).toBe(first.hash);
    expect(bundled).toHaveLength(1);

    // A reached file changed: a new hash, bundled again, and the template points at the new code.
    writeFileSync(reached, "export const word = 'second-version';\n");
    const changed = synth();
    expect(changed.hash).not.toBe(first.hash);
    expect(bundled).toHaveLength(2);
    expect(changed.code).toContain('second-version');
    expect(changed.code).not.toContain('first-version');
    expect(readdirSync(outdir).filter((name) => name.startsWith('asset.'))).toHaveLength(2);
  }, 120_000);

  it("stops the synth with esbuild's own error, naming the function, where the entry does not bundle", () => {
    writeFileSync(entry, "import { word } from './nowhere';\nexport const handler = async () => word;\n");
    expect(() => synth()).toThrow(/Failed to bundle asset Cached\/Fn\/Function\/Code\/Stage[\s\S]*Could not resolve "\.\/nowhere"/);
  }, 60_000);
});
