import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../scripts/declarations';
import { oncePerRun } from '../support/once-per-run';

export const run = promisify(execFile);
export const MAX_BUFFER = 64 * 1024 * 1024;

export const npmEnv = {
  ...process.env,
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
  // The registry's packages come from npm's cache when it has them (`npm ci` here filled it).
  npm_config_prefer_offline: 'true',
};

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
 * once per test run: test/package/pack.test.ts installs the tarball as a stranger does, and
 * test/package/api-report.test.ts reports the declarations it ships.
 */
export async function packedPackage(): Promise<PackedPackage> {
  const dir = await oncePerRun('packed-package', async (out) => {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', out], { cwd: PROJECT_ROOT, env: npmEnv, maxBuffer: MAX_BUFFER });
    writeFileSync(join(out, 'pack.json'), stdout.slice(stdout.indexOf('[')));
  });
  const [packed] = JSON.parse(readFileSync(join(dir, 'pack.json'), 'utf8')) as Array<{ filename: string; files: Array<{ path: string }> }>;
  return { tarball: join(dir, packed!.filename), filename: packed!.filename, files: packed!.files.map((f) => f.path) };
}
