import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Clock } from '../core/clock';
import { isWriteTool, type ToolDefinition, type WriteToolDefinition } from '../mcp/tool-types';
import { toolsOf, type ToolsModuleExports } from '../functions/tools-exports';
import { OutboxStore } from '../outbox/outbox-store';
import { DynamoDbApprovalStore } from '../store/dynamodb-approval-store';
import { DynamoDbIdempotencyStore } from '../store/dynamodb-idempotency-store';
import { validateTenantId } from '../core/idempotency-key';
import { REVIEW_REASON_MAX_CHARS } from '../core/state-machine';
import { ReviewDesk } from './review';
import {
  LIST_STATUSES,
  ReviewInputError,
  reviewReason,
  type AttentionEntry,
  type DecisionOutcome,
  type ListStatus,
  type OperatorAction,
  type RecordView,
} from './review-types';
import { resolveTarget, type Target, type TargetOptions } from './target';

const USAGE = `Usage: idempotent-mcp ops <command> [options]      (in this repository: npm run ops -- <command>)

  list [--status needs_review|unknown|stale|pending|failed] [--tenant T] [--tool X] [--older-than 15m] [--limit N] [--json]
  show <tenant> <tool> <key> [--json]   (the record, its review log, its delivery and its approval)
  settle <tenant> <tool> <key> --found --result '<json>' | --result-file <path>|- --reason "..." [--json]
  settle <tenant> <tool> <key> --absent --reason "..." [--json]
  recheck <tenant> <tool> <key> --reason "..." [--json]
  redrive [--max N] [--json]

Tools: --tools <module>, the endpoint's tools module (checks a --found result against the tool's result schema,
and tells what --absent means for it). This repository's \`npm run ops\` passes the reference endpoint's.
--result-file reads the result from a file, or from stdin with -, for one too long for the command line.
--reason: at most ${REVIEW_REASON_MAX_CHARS} characters.
Where: the running idempotent-mcp dev or npm start (no flags), or --stack <name>, or --table <name> [--queue <url>]
(AWS: the SDK's default credentials and region). --key-prefix <p>: whose records on a shared table (a gateway's
TABLE_KEY_PREFIX, which its banner prints; with --stack, the stack's TableKeyPrefix output); default an endpoint's.
Exit codes: 0 done; 2 bad input, nothing written; 3 the record changed meanwhile, nothing written; 1 other failures.`;

/** Exit codes: scripts tell bad input (fix the command) from a race (read again) from an outage (try later). */
export const ExitCode = { ok: 0, failure: 1, badInput: 2, changedMeanwhile: 3 } as const;

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  /** All of stdin, for `--result-file -`; process.stdin by default. */
  stdin?: () => Promise<string>;
}

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

export interface CliDeps {
  logger: Logger;
  /** Write tools by name; by default those of the `--tools` module, else none. */
  tools?: readonly ToolDefinition[];
  /** Where; resolved from the flags by default. */
  target?: (options: TargetOptions) => Promise<Target>;
  /** The desk's clock (the system's by default): a test runs it on the clock of the stack it reviews. */
  clock?: Clock;
}

const DURATION = /^(\d+)(ms|s|m|h|d)$/;

/** The tools of the `--tools` module (a .ts module needs a TypeScript loader, as `npm run ops` has), or none. */
async function toolsModule(path: string | undefined): Promise<readonly ToolDefinition[]> {
  if (path === undefined) return [];
  let module: ToolsModuleExports;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as ToolsModuleExports;
  } catch (err) {
    throw new ReviewInputError(`--tools ${path} could not be loaded: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
  }
  try {
    return toolsOf(module);
  } catch (err) {
    throw new ReviewInputError(`--tools ${path}: ${(err as Error).message}`);
  }
}
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

function duration(value: string): number {
  const match = DURATION.exec(value.trim());
  if (!match) throw new ReviewInputError(`--older-than must be a duration such as 90s, 15m, 2h or 1d (got '${value}')`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

function positiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new ReviewInputError(`--${name} must be a whole number above 0 (got '${value}')`);
  return n;
}

function identityOf(command: string, positionals: string[]) {
  const [tenant, tool, idempotencyKey, ...extra] = positionals;
  if (!tenant || !tool || !idempotencyKey || extra.length > 0) throw new ReviewInputError(`${command} takes <tenant> <tool> <key>`);
  return { tenant: tenantId(tenant), tool, idempotencyKey };
}

/** A tenant as the endpoint would accept it from a token; anything else names no record. */
function tenantId(tenant: string): string {
  try {
    return validateTenantId(tenant);
  } catch (err) {
    throw new ReviewInputError(`${JSON.stringify(tenant.slice(0, 140))} is not a tenant id: ${(err as Error).message}`);
  }
}

/** The result of `--found`: `--result '<json>'`, or `--result-file <path>` (`-`: stdin) for one too long for a command line. */
async function parseResult(inline: string | undefined, file: string | undefined, io: CliIo): Promise<unknown> {
  if (inline !== undefined && file !== undefined) throw new ReviewInputError('give the result once: --result or --result-file');
  if (inline === undefined && file === undefined)
    throw new ReviewInputError(
      "--found needs --result '<json>' or --result-file <path> (- for stdin): the downstream's result, as the tool returns it",
    );
  let text = inline;
  const flag = inline !== undefined ? '--result' : `--result-file ${file}`;
  if (file !== undefined) {
    try {
      text = file === '-' ? await (io.stdin ?? readStdin)() : await readFile(file, 'utf8');
    } catch (err) {
      throw new ReviewInputError(`${flag} could not be read: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  try {
    return JSON.parse(text!);
  } catch (err) {
    throw new ReviewInputError(`${flag} is not valid JSON: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** Runs one command; returns the exit code. Errors are one line on `err`; answers go to `out` only. */
export async function runOps(argv: string[], io: CliIo, deps: CliDeps): Promise<number> {
  let target: Target | undefined;
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args: argv,
        allowPositionals: true,
        strict: true,
        options: {
          json: { type: 'boolean' },
          status: { type: 'string' },
          tenant: { type: 'string' },
          tool: { type: 'string' },
          'older-than': { type: 'string' },
          limit: { type: 'string' },
          found: { type: 'boolean' },
          absent: { type: 'boolean' },
          result: { type: 'string' },
          'result-file': { type: 'string' },
          reason: { type: 'string' },
          max: { type: 'string' },
          stack: { type: 'string' },
          table: { type: 'string' },
          queue: { type: 'string' },
          'key-prefix': { type: 'string' },
          tools: { type: 'string' },
          help: { type: 'boolean', short: 'h' },
        },
      });
    } catch (err) {
      throw new ReviewInputError((err as Error).message.split('\n')[0]!);
    }
    const { values, positionals } = parsed;
    const [command, ...args] = positionals;
    if (values.help || !command) {
      (values.help ? io.out : io.err)(USAGE);
      return values.help ? ExitCode.ok : ExitCode.badInput;
    }
    if (!['list', 'show', 'settle', 'recheck', 'redrive'].includes(command))
      throw new ReviewInputError(`unknown command '${command}' (list, show, settle, recheck, redrive)`);

    // Everything about the input is checked before anything is read or written.
    let run: (desk: ReviewDesk) => Promise<number>;
    const json = values.json ?? false;
    const print = (value: unknown, human: () => string) => io.out(json ? JSON.stringify(value, null, 2) : human());
    if (command === 'list') {
      if (args.length) throw new ReviewInputError('list takes no positional arguments');
      const status = values.status as ListStatus | undefined;
      if (status !== undefined && !LIST_STATUSES.includes(status))
        throw new ReviewInputError(`--status must be one of ${LIST_STATUSES.join(', ')} (got '${status}')`);
      const filter = {
        status,
        tenant: values.tenant === undefined ? undefined : tenantId(values.tenant),
        tool: values.tool,
        olderThanMs: values['older-than'] === undefined ? undefined : duration(values['older-than']),
        limit: positiveInt('limit', values.limit, 200),
      };
      run = async (desk) => {
        const { entries, truncated } = await desk.list(filter);
        // --json: one array, nothing else on stdout; a cut-off list is said on stderr.
        print(entries, () => formatList(entries));
        if (truncated) io.err(`more entries match: raise --limit (now ${filter.limit}) or narrow with --status, --tenant, --tool`);
        return ExitCode.ok;
      };
    } else if (command === 'show') {
      const identity = identityOf(command, args);
      run = async (desk) => {
        const view = await desk.show(identity);
        print(view, () => formatRecord(view));
        return ExitCode.ok;
      };
    } else if (command === 'settle' || command === 'recheck') {
      const identity = identityOf(command, args);
      let action: OperatorAction;
      if (command === 'recheck') {
        if (values.found || values.absent || values.result !== undefined || values['result-file'] !== undefined)
          throw new ReviewInputError('recheck takes no --found, --absent or --result');
        action = { kind: 'recheck' };
      } else {
        if (values.found === values.absent) throw new ReviewInputError('settle needs exactly one of --found or --absent');
        if (values.absent && (values.result !== undefined || values['result-file'] !== undefined))
          throw new ReviewInputError('--absent takes no --result');
        // The reason first: a too-long one is refused before stdin is read.
        reviewReason(values.reason);
        action = values.found ? { kind: 'found', result: await parseResult(values.result, values['result-file'], io) } : { kind: 'absent' };
      }
      const reason = reviewReason(values.reason);
      run = async (desk) => {
        const outcome = await desk.decide(identity, action, reason);
        print(outcome, () => formatDecision(outcome));
        return outcome.applied ? ExitCode.ok : ExitCode.changedMeanwhile;
      };
    } else {
      if (args.length) throw new ReviewInputError('redrive takes no positional arguments');
      const max = positiveInt('max', values.max, 100);
      run = async (desk) => {
        const result = await desk.redrive(max);
        print(result, () =>
          [
            `redriven ${result.moved.length} message(s) to the outbox queue`,
            ...result.moved.map((m) => `  ${m.event_id}  ${m.tenant}  ${m.tool}`),
          ]
            .concat(result.skipped ? [`left ${result.skipped} message(s) that are not outbox events in the dead-letter queue`] : [])
            .join('\n'),
        );
        return ExitCode.ok;
      };
    }

    target = await (deps.target ?? resolveTarget)({
      stack: values.stack,
      table: values.table,
      queue: values.queue,
      keyPrefix: values['key-prefix'],
    });
    const tools = new Map<string, WriteToolDefinition>();
    for (const tool of deps.tools ?? (await toolsModule(values.tools))) if (isWriteTool(tool)) tools.set(tool.name, tool);
    const desk = new ReviewDesk({
      store: new DynamoDbIdempotencyStore({ client: target.doc, tableName: target.tableName, keyPrefix: target.keyPrefix }),
      outbox: new OutboxStore(target.doc, target.tableName, { keyPrefix: target.keyPrefix }),
      approvals: new DynamoDbApprovalStore({ client: target.doc, tableName: target.tableName, keyPrefix: target.keyPrefix }),
      tools,
      queue: target.queue,
      who: target.who,
      logger: deps.logger,
      clock: deps.clock,
    });
    return await run(desk);
  } catch (err) {
    if (err instanceof ReviewInputError) {
      io.err(`error: ${err.message}`);
      return ExitCode.badInput;
    }
    io.err(
      `failed${target ? ` (${target.name})` : ''}: ${(err as Error)?.name ?? 'Error'}: ${String((err as Error)?.message ?? err).split('\n')[0]}`,
    );
    return ExitCode.failure;
  } finally {
    target?.close();
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function age(seconds: number): string {
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

function formatList(entries: AttentionEntry[]): string {
  if (entries.length === 0) return 'nothing needs attention';
  const rows = [['STATUS', 'AGE', 'TENANT', 'TOOL', 'KEY / EVENT', 'TRIES', 'LAST ERROR']];
  for (const e of entries) {
    rows.push([
      e.status,
      age(e.age_seconds),
      e.tenant,
      e.tool,
      e.kind === 'record' ? e.idempotency_key : `event ${e.event_id}`,
      String(e.kind === 'record' ? e.attempts : e.sends),
      e.error ? `${e.error.code}: ${e.error.message}`.slice(0, 80) : '',
    ]);
  }
  return table(rows);
}

function formatRecord(view: RecordView): string {
  const lines = [
    `${view.tenant} ${view.tool} ${view.idempotency_key}`,
    `  status        ${view.status === 'ABSENT' ? 'ABSENT (no record: the key is free)' : view.status}`,
  ];
  const field = (label: string, value: unknown) => {
    if (value !== undefined) lines.push(`  ${label.padEnd(13)} ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  };
  field('fingerprint', view.fingerprint);
  field('created', view.created_at);
  field('updated', view.updated_at);
  field('replay until', view.replay_until);
  field('lease until', view.lease_expires_at);
  field('next check', view.next_check_at);
  // When a downstream showing nothing starts to prove something: before it, a request of the operation may still land.
  field(
    'decidable at',
    view.decidable_at &&
      (Date.parse(view.decidable_at) > Date.now() ? `${view.decidable_at} (a request may still land until then)` : view.decidable_at),
  );
  field('attempts', view.attempts);
  field('last error', view.error ? `${view.error.code}: ${view.error.message}` : undefined);
  field('result', view.result);
  if (view.delivery)
    field(
      'delivery',
      `${view.delivery.status} (event ${view.delivery.event_id}, ${view.delivery.sends} send(s))${view.delivery.error ? ` ${view.delivery.error.code}` : ''}`,
    );
  if (view.review.length) {
    lines.push('  review log');
    for (const e of view.review) lines.push(`    ${e.at}  ${e.by}  ${e.action}  ${e.from} -> ${e.to}  "${e.reason}"`);
  }
  if (view.ran_without)
    lines.push(
      `  ${'approval'.padEnd(13)} NONE: this call ran without anyone's ${view.ran_without} (the tool is opted out for 2025-era clients: CONFIRMATION_OPT_OUT_TOOLS)`,
    );
  const approval = view.approval;
  if (approval) {
    // Who decided and how come from the decision's log entry: a form answer never reads as the person's.
    const decided =
      approval.decided_by !== undefined
        ? ` by ${approval.decided_by}${approval.decided_via ? `, ${how(approval.decided_via, 'decided')}` : ''}`
        : '';
    lines.push(
      `  approval      ${approval.status}${decided}${decided ? '' : ` (round ${approval.round}, ${how(approval.mode, 'asked')})`}`,
    );
    lines.push(`    bound to    ${approval.tool}, fingerprint ${approval.fingerprint}`);
    lines.push(`    summary     ${approval.summary}`);
    lines.push(`    expires     ${approval.expires_at}`);
    if (approval.used_at !== undefined)
      lines.push(`    used        ${approval.used_at} by run ${approval.used_by} (a yes authorizes one run)`);
    else if (approval.status === 'approved') lines.push('    used        not yet (a yes authorizes one run)');
    // Every round, oldest first: what was asked, how, and each decision.
    let round: number | undefined;
    for (const e of approval.log) {
      if (e.round !== round) {
        round = e.round;
        const asked = approval.log.find((entry) => entry.round === round && entry.event === 'requested');
        lines.push(
          `    round ${round}${asked ? `     ${asked.via ? how(asked.via, 'asked') : 'asked'}${asked.fingerprint ? `, fingerprint ${asked.fingerprint}` : ''}${asked.summary ? `: ${asked.summary}` : ''}` : ''}`,
        );
      }
      const who =
        e.event === 'used'
          ? `  by run ${e.by}`
          : e.by !== undefined
            ? `  by ${e.by}${e.tenant !== undefined ? ` (tenant ${e.tenant})` : ''}${e.via ? `, ${how(e.via, 'decided')}` : ''}`
            : '';
      lines.push(`      ${e.at}  ${e.event}${who}`);
    }
  }
  return lines.join('\n');
}

/** How a round was asked or decided, in words: a form answer is the MCP client's word, not a signed-in person's. */
function how(via: 'url' | 'form', what: 'asked' | 'decided'): string {
  if (via === 'url') return what === 'asked' ? 'asked on the approval page' : 'signed in on the approval page';
  return what === 'asked' ? "asked in the MCP client's form" : "the MCP client's answer in a form, not a signed-in person's";
}

function formatDecision(outcome: DecisionOutcome): string {
  if (outcome.applied) {
    const { before, after } = outcome;
    return `${before.tenant} ${before.tool} ${before.idempotency_key}: ${before.status} -> ${after.status}${after.status === 'ABSENT' ? ' (key released: a retry executes once)' : ''}`;
  }
  const { read, now } = outcome;
  return (
    `not written: ${read.tenant} ${read.tool} ${read.idempotency_key} changed since it was read ` +
    `(read ${read.status}, ${read.attempts ?? 0} attempt(s); now ${now.status}, ${now.attempts ?? 0} attempt(s)). Run show and decide again.`
  );
}
