import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { Tool } from '@modelcontextprotocol/client';
import { CredentialsError, fileCredentials, type UpstreamCredential } from '../gateway/credentials';
import { connectUpstream, UpstreamError, type UpstreamCaller, type UpstreamTarget } from '../gateway/upstream';
import { CheckUsageError, planFromAnnotations, planFromConfig, type ToolPlan } from './config';
import { faultyTransport, type FaultPlan } from './faults';
import { startFaultRelay, type FaultRelay } from './relay';
import { BudgetSpent, freshKey, runScenario, SCENARIOS, type CheckContext, type CheckReport, type Scenario } from './scenarios';
import { renderScorecard } from './scorecard';

const CHECK_USAGE = `Usage: idempotent-mcp check (--url <mcp url> | --command <cmd> [args...]) [options]

Calls the server's write tools the way a retrying client does and counts the effects: the same call twice, the
answer lost after the server ran the call, concurrent duplicates, the same key with other arguments, an answer
slower than the client's timeout, a retry after the server restarted (stdio). The calls create real effects.

  --url <url>            a streamable-HTTP MCP server (loopback only unless --i-own-this-server)
  --command <cmd>        or a stdio MCP server the check starts (its arguments follow, or after --)
  --config <file>        the write tools, their arguments ({{$key}}: fresh per scenario) and how to count an
                         effect (a read tool and a found/absent rule, the gateway policy's lookup); without it,
                         writes are the tools not annotated read-only, and effects are not counted
  --credentials <file>   the gateway's credentials file; the "*" tenant's credential is used
  --scenarios <list>     default all: ${SCENARIOS.join(',')}
  --concurrency <n>      duplicates sent at once in "concurrent" (default 5)
  --max-calls <n>        calls at most, lookups included (default 200)
  --timeout <ms>         the client's timeout per call (default 5000)
  --max-time <s>         no call is started after this many seconds (default 600): the run ends within it and
                         one call's timeout
  --dry-run              list what would be called, call nothing
  --json                 the scorecard as JSON on stdout (progress stays on stderr)
  --i-own-this-server    allow a URL that is not loopback

Exit status: 0 no duplicate found, 1 duplicates found, 2 usage or connection error, 3 nothing could be counted (no
lookups, or the run stopped first). docs/check.md says more.`;

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

interface CheckOptions {
  target: UpstreamTarget;
  config?: string;
  credentials?: string;
  scenarios: Scenario[];
  concurrency: number;
  maxCalls: number;
  timeoutMs: number;
  maxTimeMs: number;
  dryRun: boolean;
  json: boolean;
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

function positiveInt(text: string | undefined, flag: string, fallback: number, max: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > max)
    throw new CheckUsageError(`${flag} must be a whole number from 1 to ${max} (got ${text})`);
  return value;
}

/** The command line, checked: one sentence per mistake. */
function parseCheckCommand(argv: readonly string[]): CheckOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        command: { type: 'string' },
        config: { type: 'string' },
        credentials: { type: 'string' },
        scenarios: { type: 'string' },
        concurrency: { type: 'string' },
        'max-calls': { type: 'string' },
        'max-time': { type: 'string' },
        timeout: { type: 'string' },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        'i-own-this-server': { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new CheckUsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  let target: UpstreamTarget;
  if (values.url !== undefined && values.command !== undefined) throw new CheckUsageError('give --url or --command, not both');
  if (values.url !== undefined) {
    if (positionals.length > 0) throw new CheckUsageError(`unexpected ${positionals.join(' ')}: arguments follow --command only`);
    let url: URL;
    try {
      url = new URL(values.url);
    } catch {
      throw new CheckUsageError(`--url must be an http(s) URL (got ${values.url.slice(0, 80)})`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new CheckUsageError(`--url must be an http(s) URL (got ${values.url.slice(0, 80)})`);
    // The check creates real effects: on someone else's server they would be someone else's orders and files.
    if (!LOOPBACK.test(url.hostname) && !values['i-own-this-server'] && !values['dry-run'])
      throw new CheckUsageError(
        `${url.host} is not this machine: the check creates real effects there; add --i-own-this-server if you own it`,
      );
    target = { url: url.href };
  } else if (values.command !== undefined) target = { command: values.command, args: positionals };
  else throw new CheckUsageError('name the server: --url <mcp url>, or --command <cmd> [args] for a stdio server');
  const scenarios = (values.scenarios?.split(',').map((name) => name.trim()) ?? [...SCENARIOS]) as Scenario[];
  for (const name of scenarios)
    if (!SCENARIOS.includes(name)) throw new CheckUsageError(`--scenarios: no scenario ${name} (there are ${SCENARIOS.join(', ')})`);
  return {
    target,
    ...(values.config !== undefined ? { config: values.config } : {}),
    ...(values.credentials !== undefined ? { credentials: values.credentials } : {}),
    scenarios,
    concurrency: positiveInt(values.concurrency, '--concurrency', 5, 50),
    maxCalls: positiveInt(values['max-calls'], '--max-calls', 200, 10_000),
    timeoutMs: positiveInt(values.timeout, '--timeout', 5_000, 600_000),
    maxTimeMs: positiveInt(values['max-time'], '--max-time', 600, 86_400) * 1000,
    dryRun: values['dry-run'] ?? false,
    json: values.json ?? false,
  };
}

async function readConfig(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CheckUsageError(`the config ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CheckUsageError(`the config ${file} is not JSON: ${(err as Error).message}`);
  }
}

function dryRun(plans: readonly ToolPlan[], options: CheckOptions, io: Io): void {
  const key = freshKey();
  io.out(`Would call ${plans.length} write tool(s), each in ${options.scenarios.join(', ')} (a fresh key per scenario, e.g. ${key}):`);
  for (const plan of plans) {
    io.out(`\n  ${plan.tool}(${JSON.stringify(plan.arguments)})`);
    for (const step of plan.prepare) io.out(`    first ${step.tool}(${JSON.stringify(step.arguments)})`);
    if (plan.otherArguments) io.out(`    other arguments ${JSON.stringify(plan.otherArguments)}`);
    io.out(
      plan.count
        ? `    effects counted by ${plan.count.tool}(${JSON.stringify(plan.count.arguments)}) found ${JSON.stringify(plan.count.found)}`
        : '    effects not counted: no lookup (give --config with "count")',
    );
  }
  io.out(
    `\nAt most ${options.maxCalls} calls, ${options.timeoutMs} ms each, none started after ${options.maxTimeMs / 1000} s. Nothing was called.`,
  );
}

/**
 * Why a server could not be reached, in the check's words: the underlying failure (spawn ENOENT, a refused
 * connection), without the gateway's "upstream" wording or an error's class.
 */
function unreachable(err: unknown): string {
  const failure = (err instanceof UpstreamError && err.cause instanceof Error ? err.cause : err) as Error & { cause?: { code?: unknown } };
  const code = typeof failure?.cause?.code === 'string' ? ` (${failure.cause.code})` : '';
  return `${String(failure?.message ?? failure).split('\n')[0]}${code}`;
}

/** `idempotent-mcp check`: returns the exit status. */
export async function runCheck(argv: readonly string[], io: Io): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out(CHECK_USAGE);
    return 0;
  }
  let options: CheckOptions;
  let credential: UpstreamCredential;
  try {
    options = parseCheckCommand(argv);
    credential = options.credentials
      ? ((await (await fileCredentials(options.credentials)).forListing()) ?? { none: true })
      : { none: true };
  } catch (err) {
    if (!(err instanceof CheckUsageError || err instanceof CredentialsError)) throw err;
    io.err(`idempotent-mcp check: ${err.message}\n\n${CHECK_USAGE}`);
    return 2;
  }
  const server = 'url' in options.target ? options.target.url : [options.target.command, ...(options.target.args ?? [])].join(' ');
  const faults: FaultPlan = new Map();
  // An HTTP server is called through a relay the check runs, which breaks the connection of a lost answer and holds a
  // slow one. A stdio server (and an OAuth-protected URL, whose metadata names its own URL, not the relay's) gets the
  // same faults from its transport.
  let relay: FaultRelay | undefined;
  if ('url' in options.target && !('oauthClientCredentials' in credential) && !options.dryRun) {
    try {
      relay = await startFaultRelay(options.target.url, faults);
    } catch (err) {
      io.err(`idempotent-mcp check: the relay in front of ${server} did not start: ${(err as Error).message}`);
      return 2;
    }
  }
  const target: UpstreamTarget = relay ? { url: relay.url } : options.target;
  const connect = () =>
    connectUpstream(target, { stderr: 'ignore', ...(relay ? {} : { wrapTransport: (transport) => faultyTransport(transport, faults) }) });
  let caller: UpstreamCaller = connect();
  try {
    let tools: Tool[];
    try {
      tools = await caller.listTools(credential);
    } catch (err) {
      // Through the relay, the client sees only a broken connection: the relay knows why.
      io.err(`idempotent-mcp check: ${server} did not list its tools: ${unreachable(relay?.forwardError ?? err)}`);
      return 2;
    }
    let plans: ToolPlan[];
    try {
      plans = options.config ? planFromConfig(await readConfig(options.config), options.config, tools) : planFromAnnotations(tools);
    } catch (err) {
      if (!(err instanceof CheckUsageError)) throw err;
      io.err(`idempotent-mcp check: ${err.message}`);
      return 2;
    }
    if (!options.config)
      io.err(
        'idempotent-mcp check: no --config: writes are the tools not annotated read-only, and their effects cannot be counted without a lookup.',
      );
    if (options.dryRun) {
      dryRun(plans, options, io);
      return 0;
    }
    let calls = 0;
    const startedAt = Date.now();
    const ctx: CheckContext = {
      caller,
      credential,
      faults,
      timeoutMs: options.timeoutMs,
      concurrency: options.concurrency,
      ...('command' in options.target
        ? {
            restart: async () => {
              await ctx.caller.close();
              caller = connect();
              return caller;
            },
          }
        : {}),
      spend: () => {
        if (++calls > options.maxCalls) throw new BudgetSpent(`--max-calls ${options.maxCalls} reached`);
        if (Date.now() - startedAt >= options.maxTimeMs) throw new BudgetSpent(`--max-time ${options.maxTimeMs / 1000} s reached`);
      },
      progress: (line) => io.err(`check: ${line}`),
    };
    const report: CheckReport = { server, rows: [], duplicates: 0 };
    for (const plan of plans)
      for (const scenario of options.scenarios) {
        if (report.stopped) {
          report.rows.push({ tool: plan.tool, scenario, answers: [], verdict: 'NOT-RUN', note: report.stopped });
          continue;
        }
        try {
          report.rows.push(await runScenario(ctx, plan, scenario));
        } catch (err) {
          if (err instanceof BudgetSpent) {
            report.stopped = err.message;
            report.rows.push({ tool: plan.tool, scenario, answers: [], verdict: 'NOT-RUN', note: err.message });
          } else if (err instanceof UpstreamError) {
            io.err(`idempotent-mcp check: ${server} could not be reached: ${unreachable(err)}`);
            return 2;
          } else throw err;
        } finally {
          faults.clear();
        }
      }
    report.duplicates = report.rows.filter((row) => row.verdict === 'DUPLICATE').length;
    io.out(options.json ? JSON.stringify(report, null, 2) : renderScorecard(report));
    // Fail closed: a run that counted nothing (no lookups, or stopped first) is not "no duplicate".
    const counted = report.rows.some((row) => row.verdict === 'SAFE' || row.verdict === 'DUPLICATE');
    return report.duplicates > 0 ? 1 : counted ? 0 : 3;
  } catch (err) {
    // One sentence, never a stack trace.
    io.err(`idempotent-mcp check stopped: ${(err as Error)?.name ?? 'Error'}: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
    return 2;
  } finally {
    await caller.close().catch(() => {});
    await relay?.close();
  }
}
