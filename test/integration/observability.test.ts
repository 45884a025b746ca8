import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { UncertainToolError } from '../../lambdas/core/errors';
import { IdempotencyEngine } from '../../lambdas/engine/engine';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';
import { newKey } from '../support/engine';

let table: Awaited<ReturnType<typeof createTestTable>>;
let output: string[];

beforeAll(async () => {
  table = await createTestTable();
  // Metrics and logs are off in the rest of the suite; here they are what is under test.
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'INFO');
  vi.stubEnv('POWERTOOLS_METRICS_NAMESPACE', 'IdempotentMcpTest');
  vi.resetModules();
  output = [];
  // Powertools writes metrics and info logs to stdout, warnings to stderr: both are read.
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      output.push(String(chunk));
      return true;
    });
  }
});
afterAll(async () => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  await table.drop();
});

/** Each EMF document on stdout: metric name -> summed value, with its dimensions. */
function emittedMetrics() {
  const found: { name: string; value: number; tool?: string }[] = [];
  for (const line of output.join('').split('\n')) {
    if (!line.includes('"_aws"')) continue;
    const doc = JSON.parse(line) as Record<string, unknown> & { _aws: { CloudWatchMetrics: { Metrics: { Name: string }[] }[] } };
    for (const { Name } of doc._aws.CloudWatchMetrics[0]!.Metrics) {
      found.push({ name: Name, value: Number(doc[Name]), tool: doc.tool as string | undefined });
    }
  }
  return found;
}

describe('observability of the engine', () => {
  it('counts executions, replays, conflicts and unknown outcomes per tool, and never logs a raw key', async () => {
    const { createEngineObserver } = await import('../../lambdas/observability/metrics');
    const engine = new IdempotencyEngine({
      store: new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName }),
      observer: createEngineObserver(),
    });
    const key = newKey();
    const run = (args: Record<string, unknown>, fail = false) =>
      engine.run({ tenant: 'tenant-obs', tool: 'observed_tool', idempotencyKey: key, args }, {}, async () => {
        if (fail) throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'no answer');
        return { result: { ok: true } };
      });
    await run({ a: 1 });
    await run({ a: 1 });
    await run({ a: 1 });
    await run({ a: 2 });
    const unknownKey = newKey();
    await engine.run({ tenant: 'tenant-obs', tool: 'observed_tool', idempotencyKey: unknownKey, args: {} }, {}, async () => {
      throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'no answer');
    });

    const metrics = emittedMetrics().filter((m) => m.tool === 'observed_tool');
    const total = (name: string) => metrics.filter((m) => m.name === name).reduce((sum, m) => sum + m.value, 0);
    expect(total('Executions')).toBe(1);
    expect(total('Replays')).toBe(2);
    expect(total('Conflicts')).toBe(1);
    expect(total('UnknownOutcomes')).toBe(1);
    expect(metrics.some((m) => m.name === 'ReplayLatency')).toBe(true);

    const text = output.join('');
    expect(text).toContain('"idempotency_event":"replayed"');
    expect(text).toContain('"idempotency_event":"unknown"');
    expect(text).not.toContain(key);
    expect(text).not.toContain(unknownKey);
  });

  it('gives each per-tool count its own EMF line with only its own tool, however many come in a row', async () => {
    const { countForTool, MetricName } = await import('../../lambdas/observability/metrics');
    const before = emittedMetrics().length;
    countForTool(MetricName.Executions, 'tool_a');
    countForTool(MetricName.Replays, 'tool_b');
    countForTool(MetricName.Executions, 'tool_a', 2);
    const lines = output
      .join('')
      .split('\n')
      .filter((line) => line.includes('"_aws"'))
      .slice(-3)
      .map((line) => JSON.parse(line));
    expect(emittedMetrics().slice(before)).toEqual([
      { name: 'Executions', value: 1, tool: 'tool_a' },
      { name: 'Replays', value: 1, tool: 'tool_b' },
      { name: 'Executions', value: 2, tool: 'tool_a' },
    ]);
    for (const line of lines) expect(line._aws.CloudWatchMetrics[0].Dimensions).toEqual([['service', 'tool']]);
  });
});
