import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { withRequestSignals } from '../../lambdas/core/request-signals';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { startEverything } from '../gateway/registry-servers';
import { cpuByPart, type CpuProfile } from './cpu-profile';
import { stopServer } from './endpoint';
import type { GatewayServerReady, ServerCounts } from './gateway-server';
import type { BenchSection } from './section';

/**
 * The gateway's price (issue 35 item 7, issue 46): `echo` of the registry's server-everything (streamable HTTP) called
 * by the same plain SDK client at the same concurrency, in interleaved turns of one run, four ways:
 * - `gateway`: through the gateway command (test/bench/gateway-server.ts, a process of its own), a fresh key each call;
 * - `relay`: through the floor, a bare relay in a process of its own that only verifies the token, claims, forwards
 *   over a kept MCP connection and completes (gateway-server.ts says what it leaves out);
 * - `direct`: straight at the upstream;
 * - `replay`: through the gateway again with keys its first calls used (answered from the record).
 * Every answer is checked (the echo's text; through the gateway and the relay `succeeded`, `replayed` as expected).
 * Each server counts what a call costs: DynamoDB requests (the counter the `floor` section uses) and requests that
 * reached the upstream, by method. BENCH_GATEWAY_PROFILE=<dir>: V8 profiles of both servers over the measured turns,
 * summarised by part (test/bench/cpu-profile.ts) and kept there.
 */
const CONNECTIONS = 8;
const ROUNDS = Number(process.env.BENCH_GATEWAY_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_GATEWAY_SECONDS ?? 4);
/** Issue 46's targets: ratios of medians, so a loaded machine stretches both sides alike. */
export const GATEWAY_TARGETS = {
  callsPerSVsRelayAtLeast: 0.8,
  p50VsRelayAtMost: 1.25,
  replayCallsPerSVsFirstCallAtLeast: 2,
  dynamodbRequestsPerFirstCallAtMost: 2,
  dynamodbRequestsPerReplayAtMost: 1,
} as const;

type Path = 'gateway' | 'relay' | 'direct' | 'replay';
const PATHS: readonly Path[] = ['gateway', 'relay', 'direct', 'replay'];
type Server = 'gateway' | 'relay';
/** What a profile covers: a server's first calls, or the gateway's replays. */
type Profiled = Server | 'replay';

async function connect(url: string, token?: string) {
  const client = new Client({ name: 'gateway-bench', version: '1.0.0' });
  // Kept for the whole run, as an agent keeps its session: each request gets its own abort signal, as the toolkit's
  // client does, so no listener piles up on the transport's.
  const fetchOwnSignals = withRequestSignals((url, init) => fetch(url, init));
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      fetch: fetchOwnSignals,
      ...(token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {}),
    }),
  );
  return client;
}

function startServer(kind: Server, env: NodeJS.ProcessEnv): Promise<{ ready: GatewayServerReady; child: ChildProcess }> {
  const child = fork(fileURLToPath(new URL('./gateway-server.ts', import.meta.url)), [kind], {
    execArgv: ['--import', import.meta.resolve('tsx')],
    env,
    // Logs at the deployed level (INFO: one line per call, as a deployment writes); stdout is dropped.
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the ${kind} did not start: ${stderr}`)), 60_000);
    child.once('message', (message: { ready: GatewayServerReady }) => {
      clearTimeout(timer);
      resolve({ ready: message.ready, child });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the ${kind} exited (${code}): ${stderr}`));
    });
  });
}

/** One IPC question to a server (gateway-server.ts answers each with one message). */
function ask<T>(child: ChildProcess, question: unknown, field: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not answer ${JSON.stringify(question)}`)), 30_000);
    const onMessage = (message: Record<string, unknown>) => {
      if (!(field in message)) return;
      child.off('message', onMessage);
      clearTimeout(timer);
      resolve(message[field] as T);
    };
    child.on('message', onMessage);
    child.send(question as object);
  });
}
const cpuMs = async (child: ChildProcess) => {
  const cpu = await ask<NodeJS.CpuUsage>(child, 'cpu', 'cpu');
  return (cpu.user + cpu.system) / 1000;
};

interface Turn {
  latencies: number[];
  unexpected: number;
  ms: number;
  counts?: ServerCounts;
  cpuMs?: number;
  /** CPU ms of this process (the load generator: the SDK client) over the turn. */
  clientCpuMs: number;
}

interface Sent {
  message: string;
  key: string;
}

type Answer = { content?: Array<{ text?: string }>; structuredContent?: { outcome?: string; replayed?: boolean } };

/** `connections` loops calling back to back for SECONDS; first calls add their keys to `executed`, replays take them in turn. */
async function turn(client: Client, path: Path, executed: Sent[]): Promise<Turn> {
  const latencies: number[] = [];
  let unexpected = 0;
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const until = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const sent: Sent =
          path === 'replay' ? executed[next++ % executed.length]! : { message: `bench ${randomUUID()}`, key: randomUUID() };
        const began = performance.now();
        try {
          const answer = (await client.callTool({
            name: 'echo',
            arguments: path === 'direct' ? { message: sent.message } : { message: sent.message, idempotency_key: sent.key },
          })) as Answer;
          const contract = answer.structuredContent;
          const ok =
            path === 'direct'
              ? answer.content?.[0]?.text?.includes(sent.message)
              : contract?.outcome === 'succeeded' &&
                contract.replayed === (path === 'replay') &&
                JSON.stringify(contract).includes(sent.message);
          if (!ok) unexpected++;
          else {
            latencies.push(performance.now() - began);
            if (path === 'gateway') executed.push(sent);
          }
        } catch {
          unexpected++;
        }
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  return { latencies, unexpected, ms: performance.now() - start, clientCpuMs: (cpu.user + cpu.system) / 1000 };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : NaN;
};
const round2 = (n: number) => Math.round(n * 100) / 100;
const sum = (values: number[]) => values.reduce((total, n) => total + n, 0);

function addCounts(into: Record<string, number>, from: Record<string, number>) {
  for (const [key, n] of Object.entries(from)) into[key] = (into[key] ?? 0) + n;
}
const perCall = (counts: Record<string, number>, calls: number) =>
  Object.fromEntries(Object.entries(counts).map(([key, n]) => [key, round2(n / calls)]));

export const gatewayBench: BenchSection = {
  key: 'gateway',
  title: `Gateway vs a bare relay (the floor) vs its upstream (server-everything echo, streamable HTTP, ${CONNECTIONS} concurrent, ${ROUNDS} x ${SECONDS} s interleaved turns each)`,
  async run() {
    const loadBefore = loadavg()[0]!;
    const dynamo = await startDynamoDbLocal();
    const everything = await startEverything();
    const state = await mkdtemp(join(tmpdir(), 'gateway-bench-'));
    const env = {
      ...process.env,
      DYNAMODB_ENDPOINT: dynamo.endpoint,
      TABLE_NAME: `gateway-bench-${Date.now()}`,
      AUTH_MODE: 'dev',
      BENCH_UPSTREAM_URL: everything.url,
      BENCH_STATE_DIR: state,
      // The reconciler's polls are not a call's cost: one an hour keeps them out of the per-call counts.
      RECONCILE_INTERVAL_MS: '3600000',
    };
    const servers = {} as Record<Server, { ready: GatewayServerReady; child: ChildProcess }>;
    const clients = {} as Record<Path, Client>;
    const turns: Record<Path, Turn[]> = { gateway: [], relay: [], direct: [], replay: [] };
    const profileDir = process.env.BENCH_GATEWAY_PROFILE;
    const profiles: Partial<Record<Profiled, Map<string, number>>> = {};
    try {
      // The gateway first: it makes the dev issuer's key in the state folder, which the relay then verifies with.
      servers.gateway = await startServer('gateway', env);
      servers.relay = await startServer('relay', env);
      clients.gateway = await connect(servers.gateway.ready.mcpUrl, servers.gateway.ready.token);
      clients.replay = await connect(servers.gateway.ready.mcpUrl, servers.gateway.ready.token);
      clients.relay = await connect(servers.relay.ready.mcpUrl, servers.relay.ready.token);
      clients.direct = await connect(everything.url);
      const executed: Sent[] = [];
      // Warm-up, not counted: JIT, connections, and the keys the replays use.
      for (const path of ['gateway', 'relay', 'direct'] as const) await turn(clients[path], path, executed);
      for (const kind of ['gateway', 'relay'] as const) await ask(servers[kind].child, 'counts', 'counts');
      const serverOf = (path: Path): Server | undefined => (path === 'direct' ? undefined : path === 'relay' ? 'relay' : 'gateway');
      for (let round = 0; round < ROUNDS; round++) {
        // Rotated each round: background load hits every path alike.
        const order = PATHS.map((_, i) => PATHS[(i + round) % PATHS.length]!);
        for (const path of order) {
          const server = serverOf(path);
          // The last round's turns through each server, profiled apart: first calls (gateway, relay) and replays.
          const profiled = profileDir && round === ROUNDS - 1 && server ? (path as Profiled) : undefined;
          if (profiled) await ask(servers[server!].child, { profile: { start: true } }, 'profiled');
          const before = server ? await cpuMs(servers[server].child) : 0;
          const t = await turn(clients[path], path, executed);
          if (profiled) {
            await mkdir(profileDir!, { recursive: true });
            const file = join(profileDir!, `${profiled}.cpuprofile`);
            await ask(servers[server!].child, { profile: { stopTo: file } }, 'profiled');
            const calls = t.latencies.length + t.unexpected;
            profiles[profiled] = new Map(
              [...cpuByPart(JSON.parse(await readFile(file, 'utf8')) as CpuProfile)].map(([part, ms]) => [part, ms / calls]),
            );
          }
          if (server) {
            t.cpuMs = (await cpuMs(servers[server].child)) - before;
            t.counts = await ask<ServerCounts>(servers[server].child, 'counts', 'counts');
          }
          turns[path].push(t);
        }
      }
    } finally {
      for (const client of Object.values(clients)) await client.close().catch(() => {});
      for (const { child } of Object.values(servers)) await stopServer(child);
      everything.stop();
      await dynamo.stop();
      await rm(state, { recursive: true, force: true });
    }
    const cell = (path: Path) => {
      const latencies = turns[path].flatMap((t) => t.latencies);
      const unexpected = sum(turns[path].map((t) => t.unexpected));
      const attempts = latencies.length + unexpected;
      const dynamodb: Record<string, number> = {};
      const upstream: Record<string, number> = {};
      for (const t of turns[path]) {
        addCounts(dynamodb, t.counts?.dynamodb ?? {});
        addCounts(upstream, t.counts?.upstream ?? {});
      }
      const cpu = sum(turns[path].map((t) => t.cpuMs ?? 0));
      return {
        calls: latencies.length,
        calls_per_s: round2((latencies.length / sum(turns[path].map((t) => t.ms))) * 1000),
        p50_ms: round2(percentile(latencies, 0.5)),
        p99_ms: round2(percentile(latencies, 0.99)),
        unexpected,
        // The load generator's own CPU: a cost every path pays alike, so on a loaded machine it narrows the ratios.
        client_cpu_ms_per_call: round2(sum(turns[path].map((t) => t.clientCpuMs)) / attempts),
        ...(path === 'direct'
          ? {}
          : {
              server_cpu_ms_per_call: round2(cpu / attempts),
              dynamodb_requests_per_call: round2(sum(Object.values(dynamodb)) / attempts),
              dynamodb_by_operation: perCall(dynamodb, attempts),
              upstream_requests_per_call: round2(sum(Object.values(upstream)) / attempts),
              upstream_by_method: perCall(upstream, attempts),
            }),
      };
    };
    const c = Object.fromEntries(PATHS.map((path) => [path, cell(path)])) as Record<Path, ReturnType<typeof cell>>;
    const ratio = (a: Path, b: Path) => ({
      calls_per_s: round2(c[a].calls_per_s / c[b].calls_per_s),
      p50: round2(c[a].p50_ms / c[b].p50_ms),
    });
    const gatewayVsRelay = ratio('gateway', 'relay');
    const replayVsFirst = ratio('replay', 'gateway');
    const targets = {
      calls_per_s_vs_relay: {
        at_least: GATEWAY_TARGETS.callsPerSVsRelayAtLeast,
        met: gatewayVsRelay.calls_per_s >= GATEWAY_TARGETS.callsPerSVsRelayAtLeast,
      },
      p50_vs_relay: { at_most: GATEWAY_TARGETS.p50VsRelayAtMost, met: gatewayVsRelay.p50 <= GATEWAY_TARGETS.p50VsRelayAtMost },
      replay_calls_per_s_vs_first_call: {
        at_least: GATEWAY_TARGETS.replayCallsPerSVsFirstCallAtLeast,
        met: replayVsFirst.calls_per_s >= GATEWAY_TARGETS.replayCallsPerSVsFirstCallAtLeast,
      },
      replay_sends_nothing_upstream: { met: c.replay.upstream_requests_per_call === 0 },
      dynamodb_requests_per_first_call: {
        at_most: GATEWAY_TARGETS.dynamodbRequestsPerFirstCallAtMost,
        met: (c.gateway.dynamodb_requests_per_call ?? Infinity) <= GATEWAY_TARGETS.dynamodbRequestsPerFirstCallAtMost,
      },
      dynamodb_requests_per_replay: {
        at_most: GATEWAY_TARGETS.dynamodbRequestsPerReplayAtMost,
        met: (c.replay.dynamodb_requests_per_call ?? Infinity) <= GATEWAY_TARGETS.dynamodbRequestsPerReplayAtMost,
      },
    };
    const loadAfter = loadavg()[0]!;
    const figures = {
      ...c,
      gateway_vs_relay: gatewayVsRelay,
      relay_vs_direct: ratio('relay', 'direct'),
      gateway_vs_direct: ratio('gateway', 'direct'),
      replay_vs_first_call: replayVsFirst,
      // Kept under their old names for the runs compared before issue 46.
      calls_per_s_vs_direct: round2(c.gateway.calls_per_s / c.direct.calls_per_s),
      p50_vs_direct: round2(c.gateway.p50_ms / c.direct.p50_ms),
      targets,
      connections: CONNECTIONS,
      rounds: ROUNDS,
      seconds_per_turn: SECONDS,
      load_avg: round2((loadBefore + loadAfter) / 2),
      load_avg_at_start: round2(loadBefore),
      load_avg_at_end: round2(loadAfter),
      cores: availableParallelism(),
      ...(profileDir
        ? {
            profile_ms_per_call: Object.fromEntries(
              (['gateway', 'replay', 'relay'] as const).map((kind) => [
                kind,
                Object.fromEntries(
                  [...profiles[kind]!].sort((a, b) => b[1] - a[1]).map(([part, ms]) => [part, Math.round(ms * 1000) / 1000]),
                ),
              ]),
            ),
          }
        : {}),
    };
    const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
    const row = (label: string, path: Path) => {
      const x = c[path];
      return [
        label,
        x.calls,
        x.calls_per_s,
        x.p50_ms,
        x.p99_ms,
        x.unexpected,
        x.dynamodb_requests_per_call ?? '',
        x.upstream_requests_per_call ?? '',
        x.server_cpu_ms_per_call ?? '',
        x.client_cpu_ms_per_call,
      ];
    };
    return {
      figures,
      table: [
        [
          'path',
          'calls',
          'calls/s',
          'p50 ms',
          'p99 ms',
          'unexpected',
          'DynamoDB req/call',
          'upstream req/call',
          'server CPU ms/call',
          'client CPU ms/call',
        ],
        row('gateway, first call', 'gateway'),
        row('gateway, replay', 'replay'),
        row('relay (the floor)', 'relay'),
        row('direct', 'direct'),
      ],
      notes: [
        `load average ${figures.load_avg} (${figures.load_avg_at_start} at start, ${figures.load_avg_at_end} at end) on ${figures.cores} cores; the targets are for a quiet machine (under 1)`,
        `gateway / relay: calls/s x${gatewayVsRelay.calls_per_s} (>= ${GATEWAY_TARGETS.callsPerSVsRelayAtLeast} [${met(targets.calls_per_s_vs_relay.met)}]), p50 x${gatewayVsRelay.p50} (<= ${GATEWAY_TARGETS.p50VsRelayAtMost} [${met(targets.p50_vs_relay.met)}])`,
        `relay / direct: calls/s x${figures.relay_vs_direct.calls_per_s}, p50 x${figures.relay_vs_direct.p50}; gateway / direct: calls/s x${figures.gateway_vs_direct.calls_per_s}, p50 x${figures.gateway_vs_direct.p50}`,
        `replay / first call: calls/s x${replayVsFirst.calls_per_s} (>= ${GATEWAY_TARGETS.replayCallsPerSVsFirstCallAtLeast} [${met(targets.replay_calls_per_s_vs_first_call.met)}]); upstream requests per replay ${c.replay.upstream_requests_per_call} [${met(targets.replay_sends_nothing_upstream.met)}]`,
        `DynamoDB requests per first call ${c.gateway.dynamodb_requests_per_call} ${JSON.stringify(c.gateway.dynamodb_by_operation)} (<= ${GATEWAY_TARGETS.dynamodbRequestsPerFirstCallAtMost} [${met(targets.dynamodb_requests_per_first_call.met)}]), per replay ${c.replay.dynamodb_requests_per_call} ${JSON.stringify(c.replay.dynamodb_by_operation)} (<= ${GATEWAY_TARGETS.dynamodbRequestsPerReplayAtMost} [${met(targets.dynamodb_requests_per_replay.met)}]); upstream per first call ${JSON.stringify(c.gateway.upstream_by_method)}`,
        ...(profileDir
          ? [`profiles in ${profileDir}: ms of main-thread CPU per call by part ${JSON.stringify(figures.profile_ms_per_call)}`]
          : []),
      ],
    };
  },
};
