import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { IdempotencyEngine } from '../../lambdas/engine/engine';
import { closeDynamoDbClient, createDynamoDbClient } from '../../lambdas/store/clients';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { ensureTable } from '../../lambdas/store/table-schema';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { TENANT, toolCases } from './floor';
import type { ServerReady } from './endpoint-server';
import type { BenchSection, SectionReport } from './section';

/**
 * The whole endpoint under load: the local endpoint (`npm start`'s app: HTTP, bearer verification, MCP, engine,
 * DynamoDB Local) against a bare stateless MCP server of the same SDK answering the same tool with one unprotected
 * PutItem (test/bench/endpoint-server.ts), both on one DynamoDB Local, each in a process of its own, loaded in turn by
 * autocannon at a fixed concurrency. Two loads: `create_order` with a fresh idempotency key on every request (first
 * calls), and with keys already executed (replays; the bare server has no replays: it writes again). Rounds
 * interleave servers and loads, starting with a different one each round, so drift in machine load hits all alike.
 * Every answer is checked (HTTP 200, the tool's result, `replayed` as the load expects): a figure counts only calls
 * that did what it claims.
 *
 * The DynamoDB floor, in the same rounds: the engine's create_order (its one request: the transaction that commits,
 * or is cancelled and answers the replay) and the bare server's PutItem, called straight from this process at the
 * same concurrency with no HTTP, auth or MCP. Their ratio is what DynamoDB Local alone allows the endpoint's.
 */

export const ENDPOINT_TARGETS = { firstCallCallsPerSVsBare: 0.8, replayCallsPerSVsBare: 0.9 } as const;
const PROTOCOL = '2026-07-28';
const SERVERS = ['endpoint', 'bare'] as const;
const LOADS = ['first_call', 'replay'] as const;
type ServerKind = (typeof SERVERS)[number];
type Load = (typeof LOADS)[number];

export interface EndpointBenchOptions {
  /** Concurrent connections (one request in flight on each). */
  connections?: number;
  rounds?: number;
  /** Length of one server's turn at one load. */
  seconds?: number;
  /** Instead of `seconds`: a fixed number of requests per turn (the smoke test). */
  requestsPerTurn?: number;
  /** Run on this DynamoDB; default: a DynamoDB Local started here. */
  dynamodbEndpoint?: string;
}

export interface CellFigures {
  calls: number;
  calls_per_s: number;
  p50_ms: number;
  p99_ms: number;
  /** Answers that were not a 200 with the load's expected tool result (should be 0), and connection errors. */
  unexpected: number;
  errors: number;
  /** One checked answer's structured result, for the harness test. */
  sample?: { key: string; result: Record<string, unknown> };
  /**
   * The server process's CPU time (user + system, all threads) over its turns, per call: what one call costs the
   * server, which the machine's load stretches far less than calls per second. Absent for the floor's cells.
   */
  server_cpu_ms_per_call?: number;
}

export interface EndpointFigures {
  endpoint: Record<Load, CellFigures>;
  bare: Record<Load, CellFigures>;
  /** The same DynamoDB requests without the servers: the engine's (first call, replay) and the bare PutItem. */
  dynamodb_floor: { engine: Record<Load, CellFigures>; put: CellFigures; calls_per_s_vs_put: Record<Load, number> };
  calls_per_s_vs_bare: Record<Load, number>;
  p50_vs_bare: Record<Load, number>;
  /** The endpoint's server CPU per call over the bare server's: what the endpoint adds, in CPU. */
  server_cpu_per_call_vs_bare: Record<Load, number>;
  targets: Record<Load, { calls_per_s_vs_bare_at_least: number; met: boolean }>;
  connections: number;
  rounds: number;
  seconds_per_turn: number | null;
  load_avg: number;
}

const rpcBody = (key: string) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name: 'create_order',
      arguments: {
        idempotency_key: key,
        customer_id: 'cust-0042',
        items: [
          { sku: 'SKU-1', quantity: 2 },
          { sku: 'SKU-2', quantity: 1 },
        ],
        currency: 'EUR',
      },
      _meta: { 'io.modelcontextprotocol/protocolVersion': PROTOCOL, 'io.modelcontextprotocol/clientCapabilities': {} },
    },
  });

/**
 * Whether an answer is what the load asked for: the endpoint's contract (`outcome`, `replayed`, the order) or the
 * bare tool's order. Returns the structured result when it is.
 */
export function checkedResult(server: ServerKind, load: Load, status: number, body: string): Record<string, unknown> | undefined {
  if (status !== 200) return undefined;
  let structured: Record<string, unknown> | undefined;
  try {
    structured = (JSON.parse(body) as { result?: { structuredContent?: Record<string, unknown>; isError?: boolean } }).result
      ?.structuredContent;
  } catch {
    return undefined;
  }
  if (!structured) return undefined;
  if (server === 'bare') return typeof structured.order_id === 'string' ? structured : undefined;
  const order = structured.result as { order_id?: unknown } | undefined;
  const ok = structured.outcome === 'succeeded' && structured.replayed === (load === 'replay') && typeof order?.order_id === 'string';
  return ok ? structured : undefined;
}

interface Turn {
  latencies: number[];
  calls: number;
  unexpected: number;
  errors: number;
  durationMs: number;
  sample?: CellFigures['sample'];
  /** The server's CPU ms over the turn (servers only). */
  cpuMs?: number;
}

/** One server's turn at one load; first calls add their keys to `executed`, replays take keys from it in turn. */
export async function runTurn(
  server: ServerKind,
  { ready, child }: { ready: ServerReady; child: ChildProcess },
  load: Load,
  executed: string[],
  options: { connections: number; seconds?: number; requestsPerTurn?: number },
): Promise<Turn> {
  const turn: Turn = { latencies: [], calls: 0, unexpected: 0, errors: 0, durationMs: 0 };
  let next = 0;
  let done!: (result: autocannon.Result) => void;
  let failed!: (err: unknown) => void;
  const finished = new Promise<autocannon.Result>((resolve, reject) => ((done = resolve), (failed = reject)));
  const settings: autocannon.Options = {
    url: ready.url,
    connections: options.connections,
    pipelining: 1,
    ...(options.requestsPerTurn ? { amount: options.requestsPerTurn } : { duration: options.seconds }),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${ready.token}`,
      'mcp-protocol-version': PROTOCOL,
      'mcp-method': 'tools/call',
      'mcp-name': 'create_order',
    },
    requests: [
      {
        method: 'POST',
        setupRequest: (request, context) => {
          const key = load === 'first_call' ? randomUUID() : executed[next++ % executed.length]!;
          (context as { key?: string }).key = key;
          // The key's Mcp-Param header, as a 2026-07-28 client mirrors it (the endpoint refuses a call without it).
          return { ...request, headers: { ...request.headers, 'mcp-param-idempotency-key': key }, body: rpcBody(key) };
        },
        onResponse: (status, body, context) => {
          const key = (context as { key: string }).key;
          const result = checkedResult(server, load, status, body);
          if (!result) {
            turn.unexpected++;
            return;
          }
          if (load === 'first_call' && server === 'endpoint') executed.push(key);
          turn.sample ??= { key, result };
        },
      },
    ],
  };
  const cpuBefore = await serverCpuMs(child);
  const instance = autocannon(settings, (err, result) => (err ? failed(err) : done(result)));
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => turn.latencies.push(responseTime));
  const result = await finished;
  turn.cpuMs = (await serverCpuMs(child)) - cpuBefore;
  turn.calls = result.requests.total;
  turn.errors = result.errors + result.timeouts;
  turn.durationMs = result.duration * 1000;
  return turn;
}

/** The server process's CPU time so far (user + system, ms), asked over IPC (test/bench/endpoint-server.ts answers). */
function serverCpuMs(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not report its CPU time')), 10_000);
    child.once('message', (message: { cpu: NodeJS.CpuUsage }) => {
      clearTimeout(timer);
      resolve((message.cpu.user + message.cpu.system) / 1000);
    });
    child.send('cpu');
  });
}

/** Starts one server process; resolves once it listens. */
export function startServer(kind: ServerKind, dynamodbEndpoint: string): Promise<{ ready: ServerReady; child: ChildProcess }> {
  const entry = fileURLToPath(new URL('./endpoint-server.ts', import.meta.url));
  const child = fork(entry, [kind], {
    // BENCH_CPU_PROF=<dir>: each server writes a V8 CPU profile there when it stops (what to look at when a ratio is missed).
    execArgv: [
      '--import',
      import.meta.resolve('tsx'),
      ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
    ],
    // Logs at the deployed level (INFO unless told): one line per call, as a deployment writes; stdout is dropped.
    env: { ...process.env, DYNAMODB_ENDPOINT: dynamodbEndpoint },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the ${kind} server did not start: ${stderr}`)), 60_000);
    child.once('message', (message: { ready: ServerReady }) => {
      clearTimeout(timer);
      resolve({ ready: message.ready, child });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the ${kind} server exited (${code}): ${stderr}`));
    });
  });
}

/** Stops a bench server process (this section's and the gateway section's): closes its IPC channel, which it exits on, and kills it if it has not exited 10 s later. */
export function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.disconnect();
  });
}

/**
 * The floor's turn: `connections` loops calling `call` back to back from this process for `seconds` (or until
 * `requestsPerTurn` calls), each call checked by its own answer.
 */
async function runStoreTurn(
  call: () => Promise<boolean>,
  options: { connections: number; seconds?: number; requestsPerTurn?: number },
): Promise<Turn> {
  const turn: Turn = { latencies: [], calls: 0, unexpected: 0, errors: 0, durationMs: 0 };
  const started = performance.now();
  const end = started + (options.seconds ?? Infinity) * 1000;
  let remaining = options.requestsPerTurn ?? Infinity;
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < end && remaining-- > 0) {
        const t = performance.now();
        const ok = await call().catch(() => false);
        turn.latencies.push(performance.now() - t);
        turn.calls++;
        if (!ok) turn.unexpected++;
      }
    }),
  );
  turn.durationMs = performance.now() - started;
  return turn;
}

/** The engine with create_order's own execution, and the bare server's PutItem, on a table of their own. */
async function startStoreFloor(dynamodbEndpoint: string) {
  const doc = createDynamoDbClient({ endpoint: dynamodbEndpoint });
  const tableName = `bench-endpoint-floor-${randomUUID().slice(0, 8)}`;
  await ensureTable(doc, tableName);
  const engine = new IdempotencyEngine({ store: new DynamoDbIdempotencyStore({ client: doc, tableName }) });
  const order = toolCases(tableName).find((c) => c.name === 'create_order')!;
  const executed: string[] = [];
  let next = 0;
  const run = (key: string) =>
    engine.run({ tenant: TENANT, tool: order.name, idempotencyKey: key, args: order.args, effect: order.effect }, {}, async () =>
      order.execution(key),
    );
  return {
    async first_call() {
      const key = randomUUID();
      const outcome = await run(key);
      if (outcome.outcome !== 'succeeded' || outcome.replayed) return false;
      executed.push(key);
      return true;
    },
    async replay() {
      const outcome = await run(executed[next++ % executed.length]!);
      return outcome.outcome === 'succeeded' && outcome.replayed;
    },
    async put() {
      const { create } = order.unprotectedItem();
      await doc.send(new PutCommand({ TableName: tableName, Item: { ...create.item, ...create.key } }));
      return true;
    },
    stop: () => closeDynamoDbClient(doc),
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}
const round2 = (n: number) => Math.round(n * 100) / 100;

function cellFigures(turns: Turn[]): CellFigures {
  const sorted = turns.flatMap((t) => t.latencies).sort((a, b) => a - b);
  const calls = turns.reduce((n, t) => n + t.calls, 0);
  const unexpected = turns.reduce((n, t) => n + t.unexpected, 0);
  const durationMs = turns.reduce((n, t) => n + t.durationMs, 0);
  return {
    calls,
    calls_per_s: Math.round((calls - unexpected) / (durationMs / 1000)),
    p50_ms: round2(percentile(sorted, 0.5)),
    p99_ms: round2(percentile(sorted, 0.99)),
    unexpected,
    errors: turns.reduce((n, t) => n + t.errors, 0),
    sample: turns.find((t) => t.sample)?.sample,
    ...(turns.every((t) => t.cpuMs !== undefined)
      ? { server_cpu_ms_per_call: round2(turns.reduce((n, t) => n + t.cpuMs!, 0) / Math.max(1, calls)) }
      : {}),
  };
}

type CellName = `${ServerKind}.${Load}` | `floor.${Load}` | 'floor.put';
const CELLS: CellName[] = [
  'endpoint.first_call',
  'bare.first_call',
  'floor.first_call',
  'floor.put',
  'endpoint.replay',
  'bare.replay',
  'floor.replay',
];

export async function measureEndpoint(options: EndpointBenchOptions = {}): Promise<EndpointFigures> {
  const connections = options.connections ?? 16;
  const rounds = options.rounds ?? 4;
  const seconds = options.requestsPerTurn ? undefined : (options.seconds ?? 5);
  const turnOptions = { connections, seconds, requestsPerTurn: options.requestsPerTurn };
  const dynamo = options.dynamodbEndpoint ? undefined : await startDynamoDbLocal();
  const dynamodbEndpoint = options.dynamodbEndpoint ?? dynamo!.endpoint;
  const children: ChildProcess[] = [];
  const floor = await startStoreFloor(dynamodbEndpoint);
  try {
    const servers = {} as Record<ServerKind, { ready: ServerReady; child: ChildProcess }>;
    for (const kind of SERVERS) {
      servers[kind] = await startServer(kind, dynamodbEndpoint);
      children.push(servers[kind].child);
    }
    // Keys the endpoint has executed: the replays' keys (the bare server takes the same requests).
    const executed: string[] = [];
    const runCell = (cell: CellName, settings: typeof turnOptions) => {
      const [where, load] = cell.split('.') as [ServerKind | 'floor', Load | 'put'];
      if (where === 'floor') return runStoreTurn(floor[load], settings);
      return runTurn(where, servers[where], load as Load, executed, settings);
    };
    // Warm-up of every cell: JIT, connection pools, DynamoDB Local. The first calls execute the keys replays use; the
    // replays' own warm-up follows, or the endpoint's replay path (its read and the stored answer, code a first call
    // does not run) would be compiled during its first measured turn while the bare server's, the same code as its
    // first calls, is warm.
    const warmup = options.requestsPerTurn ? turnOptions : { connections, seconds: 2, requestsPerTurn: undefined };
    for (const cell of CELLS.filter((cell) => cell.endsWith('first_call') || cell === 'floor.put')) await runCell(cell, warmup);
    for (const cell of CELLS.filter((cell) => cell.endsWith('replay'))) await runCell(cell, warmup);

    const turns = new Map<CellName, Turn[]>(CELLS.map((cell) => [cell, []]));
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < CELLS.length; k++) {
        const cell = CELLS[(round + k) % CELLS.length]!;
        turns.get(cell)!.push(await runCell(cell, turnOptions));
      }
    }

    const figure = (cell: CellName) => cellFigures(turns.get(cell)!);
    const figures = Object.fromEntries(
      SERVERS.map((server) => [server, Object.fromEntries(LOADS.map((load) => [load, figure(`${server}.${load}`)]))]),
    ) as Record<ServerKind, Record<Load, CellFigures>>;
    const engineFloor = Object.fromEntries(LOADS.map((load) => [load, figure(`floor.${load}`)])) as Record<Load, CellFigures>;
    const put = figure('floor.put');
    const ratio = (f: (c: CellFigures) => number) =>
      Object.fromEntries(LOADS.map((load) => [load, round2(f(figures.endpoint[load]) / f(figures.bare[load]))])) as Record<Load, number>;
    const callsPerS = ratio((c) => c.calls_per_s);
    const cpuPerCall = ratio((c) => c.server_cpu_ms_per_call!);
    const target = { first_call: ENDPOINT_TARGETS.firstCallCallsPerSVsBare, replay: ENDPOINT_TARGETS.replayCallsPerSVsBare };
    return {
      ...figures,
      calls_per_s_vs_bare: callsPerS,
      p50_vs_bare: ratio((c) => c.p50_ms),
      server_cpu_per_call_vs_bare: cpuPerCall,
      dynamodb_floor: {
        engine: engineFloor,
        put,
        calls_per_s_vs_put: Object.fromEntries(
          LOADS.map((load) => [load, round2(engineFloor[load].calls_per_s / put.calls_per_s)]),
        ) as Record<Load, number>,
      },
      targets: Object.fromEntries(
        LOADS.map((load) => [load, { calls_per_s_vs_bare_at_least: target[load], met: callsPerS[load] >= target[load] }]),
      ) as EndpointFigures['targets'],
      connections,
      rounds,
      seconds_per_turn: seconds ?? null,
      load_avg: round2(loadavg()[0]!),
    };
  } finally {
    for (const child of children) await stopServer(child);
    floor.stop();
    await dynamo?.stop();
  }
}

export const endpointBench: BenchSection = {
  key: 'endpoint',
  title: 'The whole endpoint (HTTP, auth, MCP, engine, DynamoDB Local) vs a bare MCP server with one PutItem, under load',
  async run(): Promise<SectionReport> {
    const f = await measureEndpoint();
    const row = (server: ServerKind, load: Load): (string | number)[] => {
      const c = f[server][load];
      return [
        server === 'endpoint' ? 'endpoint' : 'bare MCP server',
        load,
        c.calls_per_s,
        c.p50_ms,
        c.p99_ms,
        c.calls,
        c.unexpected + c.errors,
        c.server_cpu_ms_per_call ?? '',
      ];
    };
    const floorRow = (label: string, c: CellFigures): (string | number)[] => [
      label,
      '',
      c.calls_per_s,
      c.p50_ms,
      c.p99_ms,
      c.calls,
      c.unexpected + c.errors,
      '',
    ];
    const table = [
      ['server', 'load', 'calls/s', 'p50 ms', 'p99 ms', 'calls', 'unexpected', 'server CPU ms/call'],
      ...SERVERS.flatMap((s) => LOADS.map((l) => row(s, l))),
      floorRow('floor: engine first call, no server', f.dynamodb_floor.engine.first_call),
      floorRow('floor: engine replay, no server', f.dynamodb_floor.engine.replay),
      floorRow('floor: PutItem, no server', f.dynamodb_floor.put),
    ];
    // The samples are for the harness test; the JSON line keeps the figures.
    for (const cells of [f.endpoint, f.bare, f.dynamodb_floor.engine]) for (const load of LOADS) delete cells[load].sample;
    delete f.dynamodb_floor.put.sample;
    return {
      figures: f as unknown as Record<string, unknown>,
      table,
      notes: [
        `create_order over 2026-07-28 JSON requests, ${f.connections} connections, ${f.rounds} interleaved rounds of ${f.seconds_per_turn} s per server and load; load average ${f.load_avg} on ${availableParallelism()} cores.`,
        ...LOADS.map(
          (load) =>
            `${load}: calls/s endpoint / bare ${f.calls_per_s_vs_bare[load]} >= ${f.targets[load].calls_per_s_vs_bare_at_least} [${f.targets[load].met ? 'met' : 'MISSED'}]; p50 endpoint / bare ${f.p50_vs_bare[load]}; server CPU per call endpoint / bare ${f.server_cpu_per_call_vs_bare[load]}; ` +
            `the floor DynamoDB Local sets: engine ${load} / PutItem, calls/s, no server ${f.dynamodb_floor.calls_per_s_vs_put[load]}`,
        ),
      ],
    };
  },
};
