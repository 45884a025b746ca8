import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector';

/**
 * A V8 CPU profile's main-thread busy time by part (test/bench/endpoint-profile.ts, test/bench/gateway.ts). A part is
 * the package or folder of the function a sample is in; a native function (no script) counts for the nearest caller
 * that has one, except JSON.parse/stringify and garbage collection, which are parts of their own.
 */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}
/** Which part of the server a function belongs to, by its script's URL; undefined: a native function. */
function partOf(url: string, name: string): string | undefined {
  if (name === '(garbage collector)') return 'garbage collection';
  if (name === '(idle)') return 'idle';
  if (name === '(program)') return 'V8 and native code, unattributed';
  // The profiler's own work (taking the profile when it stops) is not the server's.
  if (url === 'node:inspector') return 'idle';
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
    [/\/lambdas\/gateway\//, 'ours: gateway (policy, upstream client)'],
    [/\/lambdas\//, 'ours: other'],
    [/\/reference\//, 'reference tools'],
    [/\/bench\/gateway-server/, 'the relay (test/bench/gateway-server.ts)'],
    [/\/bench\//, 'the bare server (test/bench/endpoint-server.ts)'],
    [/^node:/, 'Node runtime (promises, events, timers)'],
  ];
  return rules.find(([pattern]) => pattern.test(url))?.[1] ?? `other: ${url.replace(/.*node_modules\//, '').split('/')[0]}`;
}

/** Milliseconds of the main thread's busy time by part. */
export function cpuByPart(profile: CpuProfile): Map<string, number> {
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

/**
 * A bench server's V8 CPU profile over exactly the turns its parent names (`{ profile: { start: true } }`, then
 * `{ profile: { stopTo: file } }`), answered `{ profiled: true }` (test/bench/endpoint-server.ts, gateway-server.ts).
 */
export type ProfileCommand = { start: true } | { stopTo: string };
let profiler: Session | undefined;
export async function answerProfileCommand(command: ProfileCommand): Promise<void> {
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => profiler!.post(method, params, (err, result) => (err ? reject(err) : resolve(result))));
  if ('start' in command) {
    profiler = new Session();
    profiler.connect();
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 250 });
    await post('Profiler.start');
  } else {
    const { profile: taken } = (await post('Profiler.stop')) as { profile: unknown };
    await writeFile(command.stopTo, JSON.stringify(taken));
    profiler!.disconnect();
  }
  process.send!({ profiled: true });
}
