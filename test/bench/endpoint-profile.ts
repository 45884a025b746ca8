/**
 * Where a call's CPU goes in each server of the `endpoint` section: `npx tsx test/bench/endpoint-profile.ts [replay|first_call]
 * [turns] [seconds]` starts DynamoDB Local and both servers of test/bench/endpoint.ts, warms them up with first calls,
 * then loads each in turn (16 connections, as the bench) while V8 profiles it, for exactly those turns. It prints each
 * server's CPU per call (process.cpuUsage over the turns) and its main thread's busy time by part, per call, and
 * keeps the profiles (`.bench/profile-<time>/<server>.cpuprofile`, for Chrome DevTools or speedscope).
 *
 * A part is the package or folder of the function a sample is in; a native function (no script) counts for the
 * nearest caller that has one, except JSON.parse/stringify and garbage collection, which are parts of their own.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { cpuByPart, type CpuProfile } from './cpu-profile';
import { runTurn, startServer, stopServer } from './endpoint';
import type { ServerReady } from './endpoint-server';

const command = (child: ChildProcess, profile: object) =>
  new Promise<void>((resolve) => {
    child.once('message', () => resolve());
    child.send({ profile });
  });

async function main() {
  const load = (process.argv[2] ?? 'replay') as 'replay' | 'first_call';
  const turns = Number(process.argv[3] ?? 3);
  const seconds = Number(process.argv[4] ?? 8);
  const dir = join('.bench', `profile-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  await mkdir(dir, { recursive: true });
  const dynamo = await startDynamoDbLocal();
  const servers: Record<'endpoint' | 'bare', { ready: ServerReady; child: ChildProcess }> = {
    endpoint: await startServer('endpoint', dynamo.endpoint),
    bare: await startServer('bare', dynamo.endpoint),
  };
  try {
    const options = { connections: 16, seconds };
    const executed: string[] = [];
    // Warm-up: JIT and connection pools, and the keys the replays will use.
    for (const kind of ['endpoint', 'bare'] as const)
      await runTurn(kind, servers[kind], 'first_call', executed, { connections: 16, seconds: 5 });
    const totals = { endpoint: { calls: 0, cpuMs: 0 }, bare: { calls: 0, cpuMs: 0 } };
    for (const kind of ['endpoint', 'bare'] as const) await command(servers[kind].child, { start: true });
    for (let turn = 0; turn < turns; turn++)
      for (const kind of ['endpoint', 'bare'] as const) {
        const result = await runTurn(kind, servers[kind], load, executed, options);
        if (result.unexpected > 0) throw new Error(`${kind}: ${result.unexpected} answers were not the ${load} the load asked for`);
        totals[kind].calls += result.calls;
        totals[kind].cpuMs += result.cpuMs!;
      }
    const table = new Map<string, Record<'endpoint' | 'bare', number>>();
    for (const kind of ['endpoint', 'bare'] as const) {
      const file = join(dir, `${kind}.cpuprofile`);
      await command(servers[kind].child, { stopTo: file });
      for (const [part, ms] of cpuByPart(JSON.parse(await readFile(file, 'utf8')) as CpuProfile))
        table.set(part, { ...(table.get(part) ?? { endpoint: 0, bare: 0 }), [kind]: ms / totals[kind].calls });
    }
    const perCall = (kind: 'endpoint' | 'bare') => totals[kind].cpuMs / totals[kind].calls;
    console.log(`${load}, ${turns} turns of ${seconds} s per server; profiles in ${dir}`);
    console.log(
      `process CPU per call (all threads): endpoint ${perCall('endpoint').toFixed(3)} ms, bare ${perCall('bare').toFixed(3)} ms, ratio ${(perCall('endpoint') / perCall('bare')).toFixed(2)}`,
    );
    const main = (kind: 'endpoint' | 'bare') => [...table.values()].reduce((sum, row) => sum + row[kind], 0);
    console.log(`main thread busy per call: endpoint ${main('endpoint').toFixed(3)} ms, bare ${main('bare').toFixed(3)} ms`);
    console.log('| part | endpoint ms/call | bare ms/call |\n|---|---|---|');
    for (const [part, row] of [...table].sort((a, b) => b[1].endpoint + b[1].bare - (a[1].endpoint + a[1].bare)))
      if (row.endpoint + row.bare >= 0.005) console.log(`| ${part} | ${row.endpoint.toFixed(3)} | ${row.bare.toFixed(3)} |`);
  } finally {
    for (const { child } of Object.values(servers)) await stopServer(child);
    await dynamo.stop();
  }
}

await main();
