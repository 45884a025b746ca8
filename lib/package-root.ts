import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'idempotent-mcp';

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === PACKAGE_NAME) return dir;
    if (dirname(dir) === dir) throw new Error(`${PACKAGE_NAME}: cannot find its own package.json above ${from}`);
  }
}

/** This package's folder: the repository, or node_modules/idempotent-mcp once installed. */
export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

/** In the repository the constructs bundle the TypeScript sources; installed, the package ships only dist/. */
const FROM_SOURCE = existsSync(join(PACKAGE_ROOT, 'lambdas'));

/** A file of this package: its source in the repository, its build once installed. */
export const packageFile = (source: string, built: string) => join(PACKAGE_ROOT, FROM_SOURCE ? source : built);

const LOCK_FILES = ['package-lock.json', 'yarn.lock', 'pnpm-lock.yaml', 'bun.lock', 'bun.lockb'];

/**
 * The project a file belongs to: the nearest folder above it with a lock file (this repository, or the app that
 * installed the package). esbuild runs there, and every entry it bundles must be inside it.
 */
export function projectOf(file: string): { projectRoot: string; depsLockFilePath: string } {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const lock = LOCK_FILES.map((name) => join(dir, name)).find((path) => existsSync(path));
    if (lock) return { projectRoot: dir, depsLockFilePath: lock };
    if (dirname(dir) === dir)
      throw new Error(`no lock file (${LOCK_FILES.join(', ')}) above ${file}: run npm install in your project first`);
  }
}
