import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { answerText, fillTemplate, judgeLookup, prepareLookup } from '../gateway/lookup';
import { UpstreamError, type UpstreamCaller } from '../gateway/upstream';
import type { UpstreamCredential } from '../gateway/credentials';
import type { FaultPlan } from './faults';
import type { ToolPlan } from './config';

/** The scenarios, in the order they run per tool (docs/check.md says what each means). */
export const SCENARIOS = ['twice', 'lost-answer', 'concurrent', 'other-arguments', 'slow-answer', 'restart'] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** SAFE: at most one effect counted. DUPLICATE: more than one. UNKNOWN-not-counted: no lookup, or it could not tell. */
type Verdict = 'SAFE' | 'DUPLICATE' | 'UNKNOWN-not-counted' | 'NOT-RUN';

/** One row of the scorecard: one tool in one scenario. */
export interface Row {
  tool: string;
  scenario: Scenario;
  /** The fresh key of the scenario (in its arguments): where to find its effects. */
  key?: string;
  /** Effects the lookup counted after the scenario; undefined: not counted. */
  effects?: number;
  /** What the server answered each call, in order (concurrent: each distinct answer with its count). */
  answers: string[];
  verdict: Verdict;
  note?: string;
}

/** What the check found: the rows, and how many are duplicates. */
export interface CheckReport {
  server: string;
  rows: Row[];
  duplicates: number;
  /** Set when --max-calls stopped the run: the rows not run say so. */
  stopped?: string;
}

/** How a scenario reaches the server: `caller` is replaced when the check restarts a server it started. */
export interface CheckContext {
  caller: UpstreamCaller;
  credential: UpstreamCredential;
  faults: FaultPlan;
  timeoutMs: number;
  concurrency: number;
  /** Stops the server the check started and starts it again (stdio); undefined for a URL. */
  restart?: () => Promise<UpstreamCaller>;
  /** Called before every call: throws BudgetSpent past --max-calls. */
  spend: () => void;
  progress: (line: string) => void;
}

export class BudgetSpent extends Error {
  override name = 'BudgetSpent';
}

/** A fresh key: a valid idempotency key wherever it lands (an argument, a path, a name). */
export const freshKey = () => `chk-${randomBytes(10).toString('hex')}`;

const fill = (template: Record<string, unknown>, key: string) =>
  (fillTemplate(template, { args: {}, key }) ?? {}) as Record<string, unknown>;

/**
 * What a server answered, read the toolkit's way first (its result contract: replayed, conflict, unknown,
 * in-progress) and otherwise as any MCP answer: `ok` (a normal answer), `error` (isError).
 */
function readAnswer(result: CallToolResult): string {
  const contract = result.structuredContent as { outcome?: unknown; replayed?: unknown; error?: { code?: unknown } } | undefined;
  switch (contract?.outcome) {
    case 'succeeded':
      return contract.replayed === true ? 'replayed' : 'ok';
    case 'conflict':
      return 'conflict';
    case 'unknown':
      return 'unknown';
    case 'in_progress':
      return 'in-progress';
    case 'failed':
      return contract.error?.code === 'IDEMPOTENCY_KEY_REUSED' ? 'conflict' : 'error';
  }
  return result.isError ? 'error' : 'ok';
}

/** One call, and what came of it: a failure with no answer is `silence`, one the server refused is `error`. */
async function call(
  ctx: CheckContext,
  tool: string,
  args: Record<string, unknown>,
  signal?: AbortSignal,
  spent = false,
): Promise<{ answer: string; result?: CallToolResult }> {
  if (!spent) ctx.spend();
  try {
    const result = await ctx.caller.callTool(ctx.credential, tool, args, { timeoutMs: ctx.timeoutMs, ...(signal ? { signal } : {}) });
    return { answer: readAnswer(result), result };
  } catch (err) {
    if (err instanceof UpstreamError && err.failure === 'uncertain') return { answer: 'silence' };
    if (err instanceof UpstreamError && err.failure === 'not_sent') throw err;
    return { answer: 'error' };
  }
}

const occurrences = (text: string, part: string) => (part === '' ? 0 : text.split(part).length - 1);

/**
 * The effects of one key, by the plan's lookup: a found rule with textIncludes counts each occurrence of that text
 * in the answer; any other rule counts found as one. Undefined: no lookup, or an answer the rules do not decide.
 */
async function countEffects(
  ctx: CheckContext,
  plan: ToolPlan,
  args: Record<string, unknown>,
  key: string,
  first?: CallToolResult,
): Promise<number | undefined> {
  if (!plan.count) return undefined;
  const lookup = prepareLookup(plan.count, { args: { ...args, $answer: first?.structuredContent }, key });
  if (!lookup) return undefined;
  ctx.spend();
  let answer: CallToolResult;
  try {
    answer = await ctx.caller.callTool(ctx.credential, lookup.tool, lookup.arguments, { timeoutMs: ctx.timeoutMs });
  } catch {
    return undefined;
  }
  const judged = judgeLookup(lookup, answer);
  if (judged === 'undecided') return undefined;
  if (judged === 'absent') return 0;
  return lookup.found.textIncludes !== undefined ? occurrences(answerText(answer), lookup.found.textIncludes) : 1;
}

const verdictOf = (effects: number | undefined): Verdict =>
  effects === undefined ? 'UNKNOWN-not-counted' : effects > 1 ? 'DUPLICATE' : 'SAFE';

function tally(answers: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const answer of answers) counts.set(answer, (counts.get(answer) ?? 0) + 1);
  return [...counts].map(([answer, n]) => (n === 1 ? answer : `${answer}×${n}`));
}

/**
 * An `unknown` answer is truthful when the effects bear it out: the server said it does not know the outcome and did
 * not run the call again (at most one effect), instead of guessing "ok" or running it twice.
 */
function unknownNote(answers: readonly string[], verdict: Verdict): { note?: string } {
  if (!answers.some((answer) => answer.startsWith('unknown'))) return {};
  if (verdict === 'SAFE') return { note: 'a truthful unknown: the outcome was not known, and the call was not run again' };
  if (verdict === 'DUPLICATE') return { note: 'answered unknown, yet ran the call again' };
  return {};
}

/** Runs one scenario for one tool with a fresh key: the calls, then the count. */
export async function runScenario(ctx: CheckContext, plan: ToolPlan, scenario: Scenario): Promise<Row> {
  const row = (fields: Omit<Row, 'tool' | 'scenario'>): Row => ({ tool: plan.tool, scenario, ...fields });
  if (scenario === 'other-arguments' && !plan.otherArguments)
    return row({ answers: [], verdict: 'NOT-RUN', note: 'no otherArguments in the config' });
  if (scenario === 'restart' && !ctx.restart)
    return row({ answers: [], verdict: 'NOT-RUN', note: 'the check did not start this server (a URL)' });
  const key = freshKey();
  const args = fill(plan.arguments, key);
  for (const step of plan.prepare) {
    const prepared = await call(ctx, step.tool, fill(step.arguments, key));
    if (prepared.answer !== 'ok') return row({ answers: [], verdict: 'NOT-RUN', note: `prepare ${step.tool} answered ${prepared.answer}` });
  }
  ctx.progress(`${plan.tool} ${scenario} (key ${key})`);
  const answers: string[] = [];
  let first: CallToolResult | undefined;
  const note = (result: { answer: string; result?: CallToolResult }) => {
    answers.push(result.answer);
    first ??= result.result;
  };
  switch (scenario) {
    case 'twice':
      note(await call(ctx, plan.tool, args));
      note(await call(ctx, plan.tool, args));
      break;
    case 'lost-answer':
    case 'restart': {
      // The server receives and runs the call; its answer is lost on the way back, so the client gives up on it.
      const abandon = new AbortController();
      let lost = false;
      ctx.faults.set(plan.tool, {
        action: 'lose',
        onLost: () => {
          lost = true;
          abandon.abort();
        },
      });
      const unanswered = await call(ctx, plan.tool, args, abandon.signal);
      answers.push(lost ? 'lost' : unanswered.answer);
      if (scenario === 'restart') {
        ctx.progress(`${plan.tool} restart: restarting the server`);
        ctx.caller = await ctx.restart!();
      }
      note(await call(ctx, plan.tool, args));
      break;
    }
    case 'concurrent': {
      // Every call of the burst is paid for before the first leaves: the budget never stops one half-sent.
      for (let n = 0; n < ctx.concurrency; n++) ctx.spend();
      const results = await Promise.all(Array.from({ length: ctx.concurrency }, () => call(ctx, plan.tool, args, undefined, true)));
      first = results.find((result) => result.result)?.result;
      answers.push(...tally(results.map((result) => result.answer)));
      break;
    }
    case 'other-arguments':
      note(await call(ctx, plan.tool, args));
      note(await call(ctx, plan.tool, fill(plan.otherArguments!, key)));
      break;
    case 'slow-answer': {
      // The answer arrives after the client's timeout: the client retries while the first is still on its way.
      let delivered!: () => void;
      const late = new Promise<void>((resolve) => (delivered = resolve));
      ctx.faults.set(plan.tool, { action: 'delay', ms: ctx.timeoutMs + 500, onDelivered: () => delivered() });
      note(await call(ctx, plan.tool, args));
      note(await call(ctx, plan.tool, args));
      await Promise.race([late, new Promise((resolve) => setTimeout(resolve, ctx.timeoutMs + 1_000))]);
      break;
    }
  }
  const effects = await countEffects(ctx, plan, args, key, first);
  const verdict = verdictOf(effects);
  return row({
    key,
    ...(effects === undefined ? {} : { effects }),
    answers,
    verdict,
    ...(plan.count ? unknownNote(answers, verdict) : { note: 'no lookup in a config: effects not counted' }),
  });
}
