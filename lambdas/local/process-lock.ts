import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/** Whether a process with this pid exists: signal 0 checks without sending; EPERM means it exists but is another user's. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `work` once `done()` is false while holding `lock` (a file holding its holder's pid), for work more than one
 * process may ask for at once (a build shared by test files, DynamoDB Local's class-data archive). A caller that
 * finds the lock held waits until `done()` turns true or the lock is released, and takes it over if its holder is
 * gone. Answers false when `done()` was true, so `work` did not run here.
 */
export async function underLock(lock: string, done: () => boolean, work: () => Promise<void>): Promise<boolean> {
  for (;;) {
    if (done()) return false;
    try {
      writeFileSync(lock, String(process.pid), { flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = 0;
      try {
        holder = Number(readFileSync(lock, 'utf8'));
      } catch {
        // Just taken (no pid written yet) or just released.
      }
      if (holder && !isAlive(holder)) rmSync(lock, { force: true });
      await new Promise((resolve) => setTimeout(resolve, 250));
      continue;
    }
    try {
      // Finished by the holder released just before this caller took the lock.
      if (done()) return false;
      await work();
      return true;
    } finally {
      rmSync(lock, { force: true });
    }
  }
}
