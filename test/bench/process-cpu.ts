import { readdirSync, readFileSync } from 'node:fs';

/** CPU time of a process, or of one of its threads, read from Linux's /proc: the bench's CPU per call of DynamoDB Local. */

/** A process's CPU time so far (all its threads, user + system), ms; undefined when it cannot be read (not Linux, gone). */
export const processCpuMs = (pid: number | undefined) => (pid === undefined ? undefined : cpuMsOf(`/proc/${pid}/stat`));

/** The CPU time so far of the process or thread whose `stat` file this is, ms. */
export function cpuMsOf(statFile: string | undefined): number | undefined {
  if (statFile === undefined) return undefined;
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in clock ticks.
    const fields = readFileSync(statFile, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}

/** The `stat` file of DynamoDB Local's SQLite thread (sqlite4java's `SQLiteQueue`), found once. */
let sqliteStatFile: string | undefined;
export function sqliteThreadStat(pid: number | undefined): string | undefined {
  if (sqliteStatFile !== undefined || pid === undefined) return sqliteStatFile;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').startsWith('SQLiteQueue'))
        return (sqliteStatFile = `/proc/${pid}/task/${tid}/stat`);
    }
  } catch {
    // not Linux, or gone
  }
  return undefined;
}
/** USER_HZ: 100 on every Linux the project runs on (`getconf CLK_TCK`). */
const CLOCK_TICKS_PER_S = 100;
