import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../../lambdas/check/command';
import { BudgetSpent, runScenario, type CheckContext, type CheckReport, type Row } from '../../lambdas/check/scenarios';
import type { UpstreamCaller } from '../../lambdas/gateway/upstream';
import { renderScorecard } from '../../lambdas/check/scorecard';
import { tools as referenceTools } from '../../reference/tools';
import { REGISTRY_SERVERS, startEverything } from '../gateway/registry-servers';
import { BIN, ROOT, scratch, startHttpRelay, startTestGateway, type HttpRelay, type TestGateway } from '../gateway/support';
import { fixtureBookingReadTool, FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { ledger } from '../support/mcp';

/**
 * `idempotent-mcp check` against servers nobody here wrote (the registry's filesystem and memory servers, started by
 * the check over stdio; server-everything over HTTP), the same servers behind our gateway, and our own endpoint. The
 * check runs in this process, as its bin runs it; its JSON report is what CI reads.
 */

const node = process.execPath;

async function check(argv: string[]): Promise<{ status: number; report?: CheckReport; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const status = await runCheck([...argv], { out: (text) => out.push(text), err: (text) => err.push(text) });
  const text = out.join('\n');
  return {
    status,
    out: text,
    err: err.join('\n'),
    ...(argv.includes('--json') && status !== 2 ? { report: JSON.parse(text) as CheckReport } : {}),
  };
}

/** The verdict of each row, `tool scenario` → verdict. */
const verdicts = (report: CheckReport | undefined) =>
  Object.fromEntries((report?.rows ?? []).map((row) => [`${row.tool} ${row.scenario}`, row.verdict]));
const rowOf = (report: CheckReport | undefined, tool: string, scenario: Row['scenario']) =>
  report!.rows.find((row) => row.tool === tool && row.scenario === scenario)!;

/**
 * Filesystem: `edit_file` appending a line under "log" shows each application in the file (the count is each
 * occurrence of the key); `create_directory` is idempotent by nature. `keyed`: the gateway's idempotency_key added.
 */
function filesystemConfig(dir: string, keyed: boolean) {
  const key = keyed ? { idempotency_key: '{{$key}}' } : {};
  const file = `${dir}/{{$key}}.txt`;
  return {
    tools: {
      edit_file: {
        prepare: [{ tool: 'write_file', arguments: { path: file, content: 'log\n', ...key } }],
        arguments: { path: file, edits: [{ oldText: 'log\n', newText: 'log\nentry {{$key}}\n' }], ...key },
        otherArguments: { path: file, edits: [{ oldText: 'log\n', newText: 'log\nother {{$key}}\n' }], ...key },
        count: { tool: 'read_text_file', arguments: { path: '{{path}}' }, found: { textIncludes: '{{$key}}' } },
      },
      create_directory: {
        arguments: { path: `${dir}/d-{{$key}}`, ...key },
        count: { tool: 'list_directory', arguments: { path: dir }, found: { textIncludes: 'd-{{$key}}' } },
      },
    },
  };
}

let dir: string;
let cleanup: () => Promise<void>;
const files = { fsConfig: '', fsKeyedConfig: '', memoryConfig: '', memoryKeyedConfig: '', memoryCredentials: '' };

/**
 * Memory: create_entities and add_observations skip a name or an observation the graph has, so a repeated call adds
 * nothing; an observation re-worded under the same key (a client that regenerates its arguments) is added again.
 * The count is each observation carrying the key.
 */
function memoryConfig(keyed: boolean) {
  const key = keyed ? { idempotency_key: '{{$key}}' } : {};
  return {
    tools: {
      create_entities: {
        arguments: { entities: [{ name: 'c-{{$key}}', entityType: 'customer', observations: ['signed up'] }], ...key },
        count: {
          tool: 'open_nodes',
          arguments: { names: ['{{entities.0.name}}'] },
          found: { textIncludes: '"name": "{{entities.0.name}}"' },
        },
      },
      add_observations: {
        prepare: [
          { tool: 'create_entities', arguments: { entities: [{ name: 'o-{{$key}}', entityType: 'customer', observations: [] }], ...key } },
        ],
        arguments: { observations: [{ entityName: 'o-{{$key}}', contents: ['paid {{$key}}'] }], ...key },
        otherArguments: { observations: [{ entityName: 'o-{{$key}}', contents: ['paid in full {{$key}}'] }], ...key },
        count: { tool: 'open_nodes', arguments: { names: ['o-{{$key}}'] }, found: { textIncludes: ' {{$key}}"' } },
      },
    },
  };
}

beforeAll(async () => {
  ({ dir, cleanup } = await scratch('check'));
  const write = async (name: keyof typeof files, content: unknown) => {
    files[name] = join(dir, `${name}.json`);
    await writeFile(files[name], JSON.stringify(content));
  };
  await write('fsConfig', filesystemConfig(join(dir, 'direct'), false));
  await write('fsKeyedConfig', filesystemConfig(join(dir, 'gated'), true));
  await write('memoryConfig', memoryConfig(false));
  await write('memoryKeyedConfig', memoryConfig(true));
  // The gateway's credentials file: the `*` tenant's env reaches the stdio server the check starts.
  await write('memoryCredentials', { tenants: { '*': { env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') } } } });
  const { mkdir } = await import('node:fs/promises');
  await mkdir(join(dir, 'direct'));
  await mkdir(join(dir, 'gated'));
});
afterAll(async () => cleanup?.());

/** A credentials file giving the check a bearer token of our gateway or endpoint. */
async function bearer(name: string, token: string): Promise<string> {
  const file = join(dir, `${name}-credentials.json`);
  await writeFile(file, JSON.stringify({ tenants: { '*': { header: { name: 'Authorization', value: `Bearer ${token}` } } } }), {
    mode: 0o600,
  });
  return file;
}

describe('check against registry servers called directly', () => {
  it('server-filesystem: edit_file duplicates when retried, create_directory does not; exit 1 and the scorecard shows it', {
    timeout: 120_000,
  }, async () => {
    const fsDir = join(dir, 'direct');
    const run = await check([
      '--command',
      node,
      REGISTRY_SERVERS['mcp-server-filesystem'],
      fsDir,
      '--config',
      files.fsConfig,
      '--timeout',
      '8000',
      '--json',
    ]);
    expect(run.status).toBe(1);
    expect(verdicts(run.report)).toEqual({
      'edit_file twice': 'DUPLICATE',
      'edit_file lost-answer': 'DUPLICATE',
      // Concurrent edits race: those that read the file before any wrote it lose all but one update (SAFE); on a busy
      // machine one may read after another wrote, and the entry is there twice. Which one is the scheduler's choice.
      'edit_file concurrent': expect.stringMatching(/^(SAFE|DUPLICATE)$/),
      'edit_file other-arguments': 'DUPLICATE',
      'edit_file slow-answer': 'DUPLICATE',
      'edit_file restart': 'DUPLICATE',
      'create_directory twice': 'SAFE',
      'create_directory lost-answer': 'SAFE',
      'create_directory concurrent': 'SAFE',
      'create_directory other-arguments': 'NOT-RUN',
      'create_directory slow-answer': 'SAFE',
      'create_directory restart': 'SAFE',
    });
    expect(rowOf(run.report, 'edit_file', 'twice')).toMatchObject({ effects: 2, answers: ['ok', 'ok'] });
    expect(rowOf(run.report, 'edit_file', 'lost-answer')).toMatchObject({ effects: 2, answers: ['lost', 'ok'] });
    // The first answer came after the client's timeout: the client heard nothing and sent the call again.
    expect(rowOf(run.report, 'edit_file', 'slow-answer')).toMatchObject({ effects: 2, answers: ['silence', 'ok'] });
    expect(run.report!.duplicates).toBeGreaterThanOrEqual(5);

    const card = await check([
      '--command',
      node,
      REGISTRY_SERVERS['mcp-server-filesystem'],
      fsDir,
      '--config',
      files.fsConfig,
      '--scenarios',
      'twice',
    ]);
    expect(card.status).toBe(1);
    expect(card.out).toMatch(/edit_file\s+twice\s+2\s+ok → ok\s+DUPLICATE/);
    expect(card.out).toMatch(/create_directory\s+twice\s+1\s+ok → ok\s+SAFE/);
    expect(card.out).toContain('Put the gateway (docs/gateway.md) or the toolkit in front, then check again');
    expect(card.err).toContain('check: edit_file twice');
  });

  it('server-memory: a repeated call adds nothing, a re-worded one under the same key is a second effect', {
    timeout: 120_000,
  }, async () => {
    const run = await check([
      ...['--command', node, REGISTRY_SERVERS['mcp-server-memory']],
      ...[
        '--config',
        files.memoryConfig,
        '--credentials',
        files.memoryCredentials,
        '--scenarios',
        'twice,lost-answer,other-arguments,restart',
        '--timeout',
        '8000',
        '--json',
      ],
    ]);
    expect(run.status).toBe(1);
    expect(verdicts(run.report)).toEqual({
      'create_entities twice': 'SAFE',
      'create_entities lost-answer': 'SAFE',
      'create_entities other-arguments': 'NOT-RUN',
      'create_entities restart': 'SAFE',
      'add_observations twice': 'SAFE',
      'add_observations lost-answer': 'SAFE',
      'add_observations other-arguments': 'DUPLICATE',
      'add_observations restart': 'SAFE',
    });
    // The graph is in the file the credentials' env named, kept across the restart.
    expect(existsSync(join(dir, 'memory.jsonl'))).toBe(true);
    expect(rowOf(run.report, 'create_entities', 'restart')).toMatchObject({ effects: 1, answers: ['lost', 'ok'] });
  });
});

describe('check against the same servers behind our gateway', () => {
  let gateway: TestGateway;
  let memoryGateway: TestGateway;
  let credentials: string;
  let memoryCredentials: string;
  const write = (extra: Record<string, unknown> = {}) => ({ kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000, ...extra });

  beforeAll(async () => {
    gateway = await startTestGateway({
      policy: {
        tools: {
          write_file: write(),
          edit_file: write(),
          create_directory: write(),
          read_text_file: { kind: 'read' },
          list_directory: { kind: 'read' },
        },
      },
      argv: ['--', node, REGISTRY_SERVERS['mcp-server-filesystem'], join(dir, 'gated')],
    });
    credentials = await bearer('gateway', await gateway.tokenFor('demo'));
    const memoryFile = join(dir, 'gated-memory.json');
    await writeFile(memoryFile, JSON.stringify({ tenants: { '*': { env: { MEMORY_FILE_PATH: join(dir, 'gated-memory.jsonl') } } } }));
    memoryGateway = await startTestGateway({
      policy: { tools: { create_entities: write(), add_observations: write(), open_nodes: { kind: 'read' } } },
      argv: ['--credentials', memoryFile, '--', node, REGISTRY_SERVERS['mcp-server-memory']],
    });
    memoryCredentials = await bearer('memory-gateway', await memoryGateway.tokenFor('demo'));
  });
  afterAll(async () => {
    await gateway?.stop();
    await memoryGateway?.stop();
  });

  it('server-filesystem behind the gateway: no duplicate in any scenario, each retry replayed, other arguments a conflict', {
    timeout: 120_000,
  }, async () => {
    const run = await check([
      '--url',
      gateway.mcpUrl,
      '--credentials',
      credentials,
      '--config',
      files.fsKeyedConfig,
      '--timeout',
      '8000',
      '--json',
    ]);
    expect(run.status).toBe(0);
    expect(verdicts(run.report)).toEqual({
      'edit_file twice': 'SAFE',
      'edit_file lost-answer': 'SAFE',
      'edit_file concurrent': 'SAFE',
      'edit_file other-arguments': 'SAFE',
      'edit_file slow-answer': 'SAFE',
      'edit_file restart': 'NOT-RUN',
      'create_directory twice': 'SAFE',
      'create_directory lost-answer': 'SAFE',
      'create_directory concurrent': 'SAFE',
      'create_directory other-arguments': 'NOT-RUN',
      'create_directory slow-answer': 'SAFE',
      'create_directory restart': 'NOT-RUN',
    });
    expect(rowOf(run.report, 'edit_file', 'twice')).toMatchObject({ effects: 1, answers: ['ok', 'replayed'] });
    expect(rowOf(run.report, 'edit_file', 'lost-answer')).toMatchObject({ effects: 1, answers: ['lost', 'replayed'] });
    expect(rowOf(run.report, 'edit_file', 'other-arguments')).toMatchObject({ effects: 1, answers: ['ok', 'conflict'] });
    expect(rowOf(run.report, 'edit_file', 'restart').note).toContain('did not start this server');
  });

  it('server-memory behind the gateway: the re-worded observation under the same key is refused as a conflict', {
    timeout: 120_000,
  }, async () => {
    const run = await check([
      '--url',
      memoryGateway.mcpUrl,
      '--credentials',
      memoryCredentials,
      '--config',
      files.memoryKeyedConfig,
      '--scenarios',
      'twice,other-arguments',
      '--json',
    ]);
    expect(run.status).toBe(0);
    expect(verdicts(run.report)).toEqual({
      'create_entities twice': 'SAFE',
      'create_entities other-arguments': 'NOT-RUN',
      'add_observations twice': 'SAFE',
      'add_observations other-arguments': 'SAFE',
    });
    expect(rowOf(run.report, 'add_observations', 'other-arguments')).toMatchObject({ effects: 1, answers: ['ok', 'conflict'] });
  });
});

describe('check against our own endpoint', () => {
  // The reference endpoint's tools, and the fixture tools whose downstream can be made to time out. No reconciler
  // timer: an unknown call stays unknown while the check retries it.
  let stack: FixtureStack;
  beforeAll(async () => {
    stack = await startFixtureStack({
      tools: [...referenceTools, fixtureBookingReadTool(() => stack.downstream.url)],
      workers: { reconcilerTimer: false },
    });
  });
  afterAll(async () => stack?.stop());

  it("the reference endpoint's create_order: no duplicate, one order per key in its ledger", { timeout: 120_000 }, async () => {
    const config = join(dir, 'orders.json');
    const order = { idempotency_key: '{{$key}}', customer_id: 'cust-check', items: [{ sku: 'SKU-1', quantity: 1 }], currency: 'EUR' };
    await writeFile(
      config,
      JSON.stringify({
        tools: {
          create_order: {
            arguments: order,
            otherArguments: { ...order, currency: 'USD' },
            // The order id is in the first answer; get_order finds the order by it.
            count: {
              tool: 'get_order',
              arguments: { order_id: '{{$answer.result.order_id}}' },
              found: { textIncludes: '{{$answer.result.order_id}}' },
            },
          },
        },
      }),
    );
    const credentials = await bearer('endpoint', await stack.tokenFor('tenant-check'));
    const run = await check(['--url', stack.mcpUrl, '--credentials', credentials, '--config', config, '--timeout', '8000', '--json']);
    expect(run.status).toBe(0);
    expect(verdicts(run.report)).toEqual({
      'create_order twice': 'SAFE',
      'create_order lost-answer': 'SAFE',
      'create_order concurrent': 'SAFE',
      'create_order other-arguments': 'SAFE',
      'create_order slow-answer': 'SAFE',
      'create_order restart': 'NOT-RUN',
    });
    expect(rowOf(run.report, 'create_order', 'other-arguments').answers).toEqual(['ok', 'conflict']);
    const orders = (await ledger(stack)).orders.filter((o) => o.tenant === 'tenant-check');
    for (const row of run.report!.rows.filter((r) => r.key)) expect(orders.filter((o) => o.idempotency_key === row.key)).toHaveLength(1);
  });
  it('a write whose downstream timed out answers a truthful unknown: read as such, not run again, one effect', {
    timeout: 60_000,
  }, async () => {
    const config = join(dir, 'fixture-write.json');
    await writeFile(
      config,
      JSON.stringify({
        tools: {
          [FixtureTool.write]: {
            arguments: { idempotency_key: '{{$key}}', note: 'check {{$key}}' },
            count: {
              tool: 'fixture_get_booking',
              arguments: { key: '{{$key}}' },
              found: { structured: { field: 'key', equals: '{{$key}}' } },
            },
          },
        },
      }),
    );
    // The downstream books the first call, then answers after the tool's downstream timeout: the outcome is unknown.
    stack.downstream.arm({ mode: 'commit-then-timeout' });
    const credentials = await bearer('fixture', await stack.tokenFor('tenant-check-unknown'));
    const run = await check([
      '--url',
      stack.mcpUrl,
      '--credentials',
      credentials,
      '--config',
      config,
      '--scenarios',
      'twice',
      '--timeout',
      '8000',
      '--json',
    ]);
    expect(run.status).toBe(0);
    const row = rowOf(run.report, FixtureTool.write, 'twice');
    expect(row).toMatchObject({ answers: ['unknown', 'unknown'], effects: 1, verdict: 'SAFE' });
    expect(row.note).toBe('a truthful unknown: the outcome was not known, and the call was not run again');
    expect(renderScorecard(run.report!)).toMatch(/unknown → unknown\s+SAFE \(a truthful unknown: /);
    // Where the effect lands: one booking, one request; the retry was answered from the record.
    expect(stack.downstream.bookings(row.key)).toHaveLength(1);
    expect(stack.downstream.calls(row.key)).toBe(1);
  });
});

describe('check over HTTP: bounds and refusals (server-everything)', () => {
  let everything: Awaited<ReturnType<typeof startEverything>>;
  let relay: HttpRelay;
  beforeAll(async () => {
    everything = await startEverything();
    relay = await startHttpRelay(everything.url);
  });
  afterAll(async () => {
    await relay?.close();
    everything?.stop();
  });

  it('without a config: lists the tools not annotated read-only on --dry-run, and calls none', async () => {
    const run = await check(['--url', relay.url, '--dry-run']);
    expect(run.status).toBe(0);
    expect(run.out).toContain('toggle-simulated-logging');
    expect(run.out).not.toMatch(/^ {2}echo\(/m);
    expect(run.out).toContain('effects not counted: no lookup');
    expect(run.err).toContain('cannot be counted without a lookup');
    expect(relay.calls).toEqual([]);
  });

  it('--max-time bounds the run: no call is started after it, the rest of the run is NOT-RUN', { timeout: 60_000 }, async () => {
    const config = join(dir, 'echo-timed.json');
    await writeFile(config, JSON.stringify({ tools: { echo: { arguments: { message: 'check {{$key}}' } } } }));
    const before = relay.calls.length;
    // slow-answer's first call outlives its 1.5 s timeout, so its retry would start after the 1 s bound.
    const run = await check([
      '--url',
      relay.url,
      '--config',
      config,
      '--scenarios',
      'slow-answer,twice',
      '--timeout',
      '1500',
      '--max-time',
      '1',
      '--json',
    ]);
    expect(run.status).toBe(3); // nothing counted: not "no duplicate"
    expect(run.report!.stopped).toBe('--max-time 1 s reached');
    expect(run.report!.rows.map((row) => row.verdict)).toEqual(['NOT-RUN', 'NOT-RUN']);
    // Only slow-answer's first call was sent.
    expect(relay.calls.length - before).toBe(1);
  });

  it('with no lookup every row is UNKNOWN-not-counted, and --max-calls bounds the calls', { timeout: 60_000 }, async () => {
    const config = join(dir, 'echo.json');
    await writeFile(config, JSON.stringify({ tools: { echo: { arguments: { message: 'check {{$key}}' } } } }));
    const before = relay.calls.length;
    const run = await check([
      '--url',
      relay.url,
      '--config',
      config,
      '--scenarios',
      'twice,concurrent,lost-answer',
      '--max-calls',
      '4',
      '--json',
    ]);
    expect(run.status).toBe(3); // nothing counted: not "no duplicate"
    expect(run.report!.rows.map((row) => row.verdict)).toEqual(['UNKNOWN-not-counted', 'NOT-RUN', 'NOT-RUN']);
    expect(run.report!.stopped).toContain('--max-calls 4');
    // A person reading the scorecard is not told "no duplicate" when nothing was counted.
    const card = renderScorecard(run.report!);
    expect(card).toContain('Nothing was counted, so this run cannot tell whether a retry duplicates');
    expect(card).not.toContain('No duplicate');
    // twice sent 2; the burst of 5 would pass the bound, so none of it was sent.
    expect(relay.calls.length - before).toBe(2);
  });

  it("the check's relay loses an answer after the server received the call, and holds one past the client's timeout", {
    timeout: 60_000,
  }, async () => {
    const config = join(dir, 'echo-faults.json');
    await writeFile(config, JSON.stringify({ tools: { echo: { arguments: { message: 'check {{$key}}' } } } }));
    const run = await check([
      '--url',
      relay.url,
      '--config',
      config,
      '--scenarios',
      'lost-answer,slow-answer',
      '--timeout',
      '5000',
      '--json',
    ]);
    expect(run.status).toBe(3); // nothing counted: not "no duplicate"
    const [lost, slow] = run.report!.rows;
    expect(lost).toMatchObject({ answers: ['lost', 'ok'], verdict: 'UNKNOWN-not-counted' });
    expect(slow).toMatchObject({ answers: ['silence', 'ok'], verdict: 'UNKNOWN-not-counted' });
    // Both calls of each scenario reached the server: the first one's answer is what went missing.
    for (const row of [lost!, slow!]) expect(relay.calls.filter((call) => call.arguments.message === `check ${row.key}`)).toHaveLength(2);
  });

  it('a config mistake is one sentence naming the tool, exit 2, and nothing is called', async () => {
    const before = relay.calls.length;
    const mistakes = {
      'empty-found': [
        { echo: { arguments: { message: '{{$key}}' }, count: { tool: 'get-sum', arguments: { a: 1, b: 2 }, found: {} } } },
        "tool echo: count.found is empty: say what in the lookup's answer shows the effect (textEquals, textIncludes, structured)",
      ],
      'write-as-lookup': [
        {
          echo: {
            arguments: { message: '{{$key}}' },
            count: { tool: 'toggle-simulated-logging', arguments: {}, found: { textIncludes: 'x' } },
          },
          'toggle-simulated-logging': { arguments: {} },
        },
        'tool echo: count.tool toggle-simulated-logging is a write this config checks; the lookup must be a read tool',
      ],
    } as const;
    for (const [name, [tools, sentence]] of Object.entries(mistakes)) {
      const config = join(dir, `${name}.json`);
      await writeFile(config, JSON.stringify({ tools }));
      const run = await check(['--url', relay.url, '--config', config]);
      expect(run.status).toBe(2);
      expect(run.err).toBe(`idempotent-mcp check: ${config}: ${sentence}`);
    }
    expect(relay.calls.length - before).toBe(0);
  });

  it('refuses a server not on this machine without --i-own-this-server, and a mistake is one sentence, exit 2', async () => {
    const far = await check(['--url', 'https://mcp.example.com/mcp']);
    expect(far.status).toBe(2);
    expect(far.err.split('\n')[0]).toBe(
      'idempotent-mcp check: mcp.example.com is not this machine: the check creates real effects there; add --i-own-this-server if you own it',
    );
    const gone = await check(['--url', 'http://127.0.0.1:1/mcp']);
    expect(gone.status).toBe(2);
    expect(gone.err).toBe('idempotent-mcp check: http://127.0.0.1:1/mcp did not list its tools: connect ECONNREFUSED 127.0.0.1:1');
    const missing = await check(['--command', 'no-such-mcp-server']);
    expect(missing.status).toBe(2);
    expect(missing.err).toBe('idempotent-mcp check: no-such-mcp-server did not list its tools: spawn no-such-mcp-server ENOENT');
  });
});

describe('the bin', () => {
  const bin = (...argv: string[]) =>
    promisify(execFile)(join(BIN, 'tsx'), ['bin/idempotent-mcp.ts', 'check', ...argv], { cwd: ROOT, timeout: 60_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );

  it('exits 1 when it found duplicates, 2 on a usage error with one sentence and no stack trace', { timeout: 120_000 }, async () => {
    const found = await bin(
      '--command',
      node,
      REGISTRY_SERVERS['mcp-server-filesystem'],
      join(dir, 'direct'),
      '--config',
      files.fsConfig,
      '--scenarios',
      'twice',
    );
    expect(found.code).toBe(1);
    expect(found.stdout).toMatch(/edit_file\s+twice\s+2\s+ok → ok\s+DUPLICATE/);
    const wrong = await bin('--url', 'http://127.0.0.1:1/mcp', '--max-calls', 'many');
    expect(wrong.code).toBe(2);
    expect(wrong.stderr.split('\n')[0]).toBe('idempotent-mcp check: --max-calls must be a whole number from 1 to 10000 (got many)');
    expect(wrong.stderr).not.toMatch(/^\s+at /m);
  });
});

describe('the bound on calls', () => {
  it('a concurrent burst that would pass --max-calls is not started at all: no call of it half-sent', async () => {
    // The server's side of the port, recording each call as it leaves: which calls left is known when runScenario returns.
    const sent: string[] = [];
    const caller = {
      callTool: async (_credential: unknown, tool: string) => {
        sent.push(tool);
        return { content: [] };
      },
    } as unknown as UpstreamCaller;
    let calls = 0;
    const ctx: CheckContext = {
      caller,
      credential: { none: true },
      faults: new Map(),
      timeoutMs: 1_000,
      concurrency: 5,
      // As `--max-calls 3` does in the command.
      spend: () => {
        if (++calls > 3) throw new BudgetSpent('--max-calls 3 reached');
      },
      progress: () => {},
    };
    await expect(runScenario(ctx, { tool: 'write', arguments: {}, prepare: [] }, 'concurrent')).rejects.toThrow(BudgetSpent);
    expect(sent).toEqual([]);
  });
});
