import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import { underLock } from '../../lambdas/local/process-lock';

/** Written last into a finished build's folder: a folder without it is a build that did not finish. */
const DONE = '.done';

/**
 * What more than one test file builds the same way (a synth, a bundle, the packed package), built once per test run:
 * `build` writes into an empty folder of the run's own (`inject('runScratch')`, made and removed by
 * test/support/global-setup.ts), and every caller gets that folder's path, to read or copy from, never to write.
 * A file that asks while another builds waits for it; if that build fails, or its process is gone, the waiting file
 * builds itself. `name` is the build's one distinct configuration: two builds of the same name must be the same.
 */
export async function oncePerRun(name: string, build: (dir: string) => Promise<void>): Promise<string> {
  const shared = join(inject('runScratch'), name);
  await underLock(
    `${shared}.lock`,
    () => existsSync(join(shared, DONE)),
    async () => {
      const building = `${shared}.${process.pid}`;
      try {
        rmSync(building, { recursive: true, force: true });
        mkdirSync(building, { recursive: true });
        await build(building);
        writeFileSync(join(building, DONE), '');
        renameSync(building, shared);
      } finally {
        rmSync(building, { recursive: true, force: true });
      }
    },
  );
  return shared;
}
