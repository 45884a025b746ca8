import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { parseGatewayCommand, startGatewayCommand } from '../../lambdas/gateway/command';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { startEverything } from '../gateway/registry-servers';
import type { BenchSection } from './section';

/**
 * The gateway's price (issue 35, item 7): `echo` of the registry's server-everything (streamable HTTP) called with a
 * fresh key and message each time, through the gateway (auth, policy, claim and completion on DynamoDB Local, the
 * lookup memo, the upstream call) and straight at the upstream, by the same plain SDK client at the same concurrency,
 * in interleaved turns of one run. Every answer is checked (the echo's text; through the gateway `succeeded`).
 */
const CONNECTIONS = 8;
const ROUNDS = 3;
const SECONDS = 4;
const policy = { tools: { echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000 } } };

async function connect(url: string, token?: string) {
  const client = new Client({ name: 'gateway-bench', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : undefined),
  );
  return client;
}

interface Turn {
  latencies: number[];
  unexpected: number;
  ms: number;
}

async function turn(client: Client, keyed: boolean): Promise<Turn> {
  const latencies: number[] = [];
  let unexpected = 0;
  const start = performance.now();
  const until = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const message = `bench ${randomUUID()}`;
        const began = performance.now();
        try {
          const answer = (await client.callTool({
            name: 'echo',
            arguments: keyed ? { message, idempotency_key: randomUUID() } : { message },
          })) as {
            content?: Array<{ text?: string }>;
            structuredContent?: { outcome?: string; result?: unknown };
          };
          const ok = keyed
            ? answer.structuredContent?.outcome === 'succeeded' && JSON.stringify(answer.structuredContent).includes(message)
            : answer.content?.[0]?.text?.includes(message);
          if (!ok) unexpected++;
          else latencies.push(performance.now() - began);
        } catch {
          unexpected++;
        }
      }
    }),
  );
  return { latencies, unexpected, ms: performance.now() - start };
}

const p50 = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)]! : NaN;
};
const round2 = (n: number) => Math.round(n * 100) / 100;

export const gatewayBench: BenchSection = {
  key: 'gateway',
  title: `Gateway vs its upstream (server-everything echo, streamable HTTP, ${CONNECTIONS} concurrent, ${ROUNDS} x ${SECONDS} s turns each)`,
  async run() {
    const dynamo = await startDynamoDbLocal();
    const everything = await startEverything();
    const state = await mkdtemp(join(tmpdir(), 'gateway-bench-'));
    const policyFile = join(state, 'policy.json');
    await writeFile(policyFile, JSON.stringify(policy));
    const env = {
      ...process.env,
      DYNAMODB_ENDPOINT: dynamo.endpoint,
      TABLE_NAME: `gateway-bench-${Date.now()}`,
      AUTH_MODE: 'dev',
      LOG_LEVEL: 'ERROR',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
    };
    const gateway = await startGatewayCommand(
      parseGatewayCommand(['--policy', policyFile, '--port', '0', '--state-dir', state, '--upstream-url', everything.url], env),
      env,
    );
    const clients = { gateway: await connect(gateway.mcpUrl, await gateway.tokenFor('demo')), direct: await connect(everything.url) };
    const turns: Record<'gateway' | 'direct', Turn[]> = { gateway: [], direct: [] };
    const load = loadavg()[0]!;
    try {
      await turn(clients.gateway, true); // warm-up, not counted
      await turn(clients.direct, false);
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? (['gateway', 'direct'] as const) : (['direct', 'gateway'] as const);
        for (const kind of order) turns[kind].push(await turn(clients[kind], kind === 'gateway'));
      }
    } finally {
      await clients.gateway.close();
      await clients.direct.close();
      await gateway.stop();
      everything.stop();
      await dynamo.stop();
      await rm(state, { recursive: true, force: true });
    }
    const cell = (kind: 'gateway' | 'direct') => {
      const latencies = turns[kind].flatMap((t) => t.latencies);
      const ms = turns[kind].reduce((sum, t) => sum + t.ms, 0);
      return {
        calls: latencies.length,
        calls_per_s: round2((latencies.length / ms) * 1000),
        p50_ms: round2(p50(latencies)),
        unexpected: turns[kind].reduce((s, t) => s + t.unexpected, 0),
      };
    };
    const g = cell('gateway');
    const d = cell('direct');
    const figures = {
      gateway: g,
      direct: d,
      calls_per_s_vs_direct: round2(g.calls_per_s / d.calls_per_s),
      p50_vs_direct: round2(g.p50_ms / d.p50_ms),
      connections: CONNECTIONS,
      load_avg: round2((load + loadavg()[0]!) / 2),
    };
    return {
      figures,
      table: [
        ['path', 'calls', 'calls/s', 'p50 ms', 'unexpected'],
        ['gateway', g.calls, g.calls_per_s, g.p50_ms, g.unexpected],
        ['direct', d.calls, d.calls_per_s, d.p50_ms, d.unexpected],
      ],
      notes: [`gateway/direct: calls/s x${figures.calls_per_s_vs_direct}, p50 x${figures.p50_vs_direct}; load average ${figures.load_avg}`],
    };
  },
};
