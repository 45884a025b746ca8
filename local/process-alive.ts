/** Whether a process with this pid exists: signal 0 checks without sending; EPERM means it exists but is another user's. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
