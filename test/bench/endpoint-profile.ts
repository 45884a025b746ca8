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
import { runTurn, startServer, stopServer } from './endpoint';
import type { ServerReady } from './endpoint-server';

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/** Which part of the server a function belongs to, by its script's URL; undefined: a native function. */
function partOf(url: string, name: string): string | undefined {
  if (name === '(garbage collector)') return 'garbage collection';
  if (name === '(idle)') return 'idle';
  if (name === '(program)') return 'V8 and native code, unattributed';
  if (!url) return /^(parse|stringify)$/.test(name) ? 'JSON.parse / stringify' : undefined;
  const rules: [RegExp, string][] = [
    [/@hono\/node-server/, 'HTTP: @hono/node-server'],
    [/undici/, 'HTTP: web Request / Response / Headers (undici)'],
    [/^node:(_http|http|net|stream|internal\/(http|streams|stream_base|net|webstreams|url))|^node:url/, 'HTTP: Node http, net, streams'],
    [/@smithy|@aws-sdk|@aws-crypto/, 'AWS SDK (the DynamoDB request)'],
    [/@modelcontextprotocol/, 'MCP SDK'],
    [/\/zod\//, 'zod'],
    [/\/jose\//, 'jose (bearer token)'],
    [/^node:internal\/crypto|^node:crypto/, 'Node crypto (ECDSA verify, SigV4 hashes, UUIDs)'],
    [/\/hono\//, 'hono (routing, middleware)'],
    [/powertools\/(logger|commons)/, 'Powertools Logger'],
    [/powertools\/metrics/, 'Powertools Metrics'],
    [/\/lambdas\/(auth|http)\//, 'ours: HTTP app and auth'],
    [/\/lambdas\/mcp\//, 'ours: MCP layer'],
    [/\/lambdas\/(engine|store|core)\//, 'ours: engine, store, core'],
    [/\/lambdas\//, 'ours: other'],
    [/\/reference\//, 'reference tools'],
    [/\/bench\//, 'the bare server (test/bench/endpoint-server.ts)'],
    [/^node:/, 'Node runtime (promises, events, timers)'],
  ];
  return rules.find(([pattern]) => pattern.test(url))?.[1] ?? `other: ${url.replace(/.*node_modules\//, '').split('/')[0]}`;
}

/** Milliseconds of the main thread's busy time by part. */
function cpuByPart(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const parts = new Map<number, string>();
  const part = (id: number): string => {
    let found = parts.get(id);
    if (found === undefined) {
      const { url, functionName } = byId.get(id)!.callFrame;
      const up = parent.get(id);
      found = partOf(url, functionName) ?? (up === undefined ? 'V8 and native code, unattributed' : part(up));
      parts.set(id, found);
    }
    return found;
  };
  const ms = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const name = part(id);
    if (name !== 'idle') ms.set(name, (ms.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  });
  return ms;
}

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
