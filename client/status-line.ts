import type { WriteToolResult } from '../lambdas/core/result-contract';
import type { CallState } from './call-ledger';
import type { TransportFailure } from './retry';

/**
 * What a status line is made of: the call's key, its last answer (or why there was none) and its attempts.
 */
export interface StatusLineInput {
  tool: string;
  key: string;
  state: CallState;
  attempts: number;
  result?: WriteToolResult;
  failure?: TransportFailure;
  /** The call's argument names: result fields that echo them (customer_id) are not news and are left out. */
  argumentNames?: readonly string[];
}

/**
 * Long ids keep their head (the prefix says what they are) and tail (what tells two apart).
 */
export function shortId(id: string, max = 22): string {
  return id.length <= max ? id : `${id.slice(0, 12)}…${id.slice(-6)}`;
}

/**
 * A key shown to a model or a terminal: its kind prefix and last 6 characters, enough to tell calls apart and
 * far too little to reuse (the full key stays in the ledger).
 */
export function keyHint(key: string): string {
  const prefix = /^[a-z]{1,4}_/.exec(key)?.[0] ?? '';
  return key.length <= prefix.length + 8 ? key : `${prefix}…${key.slice(-6)}`;
}

const seconds = (ms: number) => (ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`);

/** The result's own ids and status, which is what a model needs to refer to the effect later. */
function resultSummary(result: unknown, argumentNames: readonly string[]): string {
  if (!result || typeof result !== 'object') return '';
  const parts: string[] = [];
  for (const [name, value] of Object.entries(result as Record<string, unknown>)) {
    if (argumentNames.includes(name)) continue;
    if ((name.endsWith('_id') || name === 'status') && (typeof value === 'string' || typeof value === 'number')) {
      parts.push(`${name} ${typeof value === 'string' ? shortId(value) : value}`);
    }
    if (parts.length === 3) break;
  }
  return parts.join(', ');
}

function clip(text: string, max = 100): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * One line per call, for the model's context: which call, what happened, and what to do next.
 * e.g. `request_payment op_…K3M2QD : succeeded (replayed), payment_id pay_123`
 */
export function statusLine(call: StatusLineInput): string {
  const head = `${call.tool} ${call.key ? keyHint(call.key) : '(no key)'} : `;
  const tail = call.attempts > 1 ? ` [${call.attempts} attempts]` : '';
  const r = call.result;
  if (call.failure || !r) {
    const why = call.failure?.message ?? 'no answer';
    if (call.failure?.kind === 'deterministic') return `${head}failed, ${why}; not retried${tail}`;
    if (!call.key || call.state === 'submitted')
      return `${head}not sent (${why}); call again later${call.key ? ', the key is kept' : ''}${tail}`;
    if (call.state === 'succeeded' || call.state === 'failed')
      return `${head}no answer (${why}); it ${call.state} earlier: call again later for its result${tail}`;
    return `${head}unknown, no answer (${why}); call again later, the key is kept${tail}`;
  }
  const code = r.error?.code ?? '';
  const after = r.retry_after_ms !== undefined ? ` after ${seconds(r.retry_after_ms)}` : ' later';
  // A "not now" for an intent an earlier answer settled (the client keeps that state): say both.
  if (r.retryable && (call.state === 'succeeded' || (call.state === 'failed' && r.outcome !== 'failed')))
    return `${head}${r.outcome.replace('_', ' ')} for now (${code}); it ${call.state} earlier: call again with the same key${after} for its result${tail}`;
  switch (r.outcome) {
    case 'succeeded': {
      const summary = resultSummary(r.result, call.argumentNames ?? []);
      return `${head}succeeded${r.replayed ? ' (replayed)' : ''}${summary ? `, ${summary}` : ''}${tail}`;
    }
    case 'failed':
      return r.retryable
        ? `${head}failed ${code} (nothing ran); call again with the same key${after}${tail}`
        : `${head}failed ${code}${r.replayed ? ' (replayed)' : ''}: ${clip(r.error?.message ?? '')} Do not retry.${tail}`;
    case 'in_progress':
      return `${head}in progress; call again with the same key${after}${tail}`;
    case 'unknown':
      return `${head}unknown, being verified; call again with the same key${after}, never a new one${tail}`;
    case 'conflict':
      return `${head}conflict ${code}: this intent already ran with other arguments; nothing was run${tail}`;
    case 'rejected':
      return `${head}rejected ${code}: ${clip(r.error?.message ?? '')}${tail}`;
  }
}
