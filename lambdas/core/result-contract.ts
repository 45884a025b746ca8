import { ErrorCode } from './errors';
import { keyForEcho } from './idempotency-key';

/** A write tool's outcome (`WriteToolResult['outcome']`). */
export type Outcome = WriteToolResult['outcome'];

/** The error of a failed write tool's result (`WriteToolResult['error']`). */
export type ContractError = NonNullable<WriteToolResult['error']>;

/**
 * A write tool's answer, the one result contract of every write tool (the MCP `structuredContent`): its outcome,
 * the result or error, and retry advice.
 * @public
 */
export interface WriteToolResult<R = unknown> {
  /** What became of the call: `succeeded`, `failed`, `in_progress`, `unknown`, `conflict` or `rejected`. */
  outcome: 'succeeded' | 'failed' | 'in_progress' | 'unknown' | 'conflict' | 'rejected';
  /** True when the answer is replayed from the first call's settled record: nothing ran this time. */
  replayed: boolean;
  /** Whether calling again *with the same key* can help. */
  retryable: boolean;
  /** With `retryable`: wait this many ms before calling again with the same key. */
  retry_after_ms?: number;
  /** The key the call ran under (its `idempotency_key`, or its `operation_id`); absent when the call carried none. */
  idempotency_key?: string;
  /** The tool's result, when `outcome` is `succeeded`. */
  result?: R;
  /** The error of a failed call: a stable code (`ErrorCode`) and a sentence. */
  error?: { code: string; message: string };
  /** On a replay: when the operation first ran (ISO 8601). */
  first_executed_at?: string;
  /** With APPROVAL_REQUIRED: the approval page's link, for the person to open (the text says so too). */
  approval_url?: string;
}

/** How long a client given an approval link waits before calling again: a person signs in and reads meanwhile. */
const APPROVAL_RETRY_AFTER_MS = 5000;

const iso = (ms: number) => new Date(ms).toISOString();

/** A message as a sentence: ended (with its own `.`, `?` or `!`, else a period), so the next one reads apart. */
const asSentence = (text: string) => (/[.!?]$/.test(text.trimEnd()) ? text.trimEnd() : `${text.trimEnd()}.`);

/**
 * The field that carries a write tool's key: `idempotency_key`, or `operation_id` for tools with server-issued ids.
 */
export type KeyField = 'idempotency_key' | 'operation_id';

/** The key as echoed; a call that carried no key echoes none (an empty `idempotency_key` would read as one). */
const echo = (key: string) => (key === '' ? {} : { idempotency_key: key });
const echoShort = (key: string) => echo(keyForEcho(key));

export const WriteResults = {
  succeeded<R>(key: string, result: R, replay?: { firstExecutedAt: number }): WriteToolResult<R> {
    return {
      outcome: 'succeeded',
      replayed: Boolean(replay),
      retryable: false,
      ...echo(key),
      result,
      ...(replay ? { first_executed_at: iso(replay.firstExecutedAt) } : {}),
    };
  },
  /** A business rejection (terminal): the same key will always answer the same. */
  failed(key: string, error: ContractError, replay?: { firstExecutedAt: number }): WriteToolResult<never> {
    return {
      outcome: 'failed',
      replayed: Boolean(replay),
      retryable: false,
      ...echo(key),
      error,
      ...(replay ? { first_executed_at: iso(replay.firstExecutedAt) } : {}),
    };
  },
  /** Nothing happened and the key is free: calling again with the same key executes. */
  transientFailure(key: string, error: ContractError, retryAfterMs: number): WriteToolResult<never> {
    return { outcome: 'failed', replayed: false, retryable: true, retry_after_ms: retryAfterMs, ...echoShort(key), error };
  },
  inProgress(key: string, retryAfterMs: number): WriteToolResult<never> {
    return {
      outcome: 'in_progress',
      replayed: false,
      retryable: true,
      retry_after_ms: retryAfterMs,
      ...echo(key),
      error: {
        code: ErrorCode.OPERATION_IN_PROGRESS,
        message: 'The first call with this key is still running; call again with the same key to get its result.',
      },
    };
  },
  unknown(key: string, retryAfterMs: number, message?: string): WriteToolResult<never> {
    return {
      outcome: 'unknown',
      replayed: false,
      retryable: true,
      retry_after_ms: retryAfterMs,
      ...echoShort(key),
      error: {
        code: ErrorCode.OUTCOME_UNKNOWN,
        message:
          message ?? 'The outcome is being verified with the downstream system; call again later with the same key, never with a new one.',
      },
    };
  },
  conflict(key: string, keyField: KeyField = 'idempotency_key'): WriteToolResult<never> {
    return {
      outcome: 'conflict',
      replayed: false,
      retryable: false,
      ...echo(key),
      error: {
        code: ErrorCode.IDEMPOTENCY_KEY_REUSED,
        message:
          keyField === 'operation_id'
            ? 'This operation_id was already used with different arguments; nothing was run. Get a new operation_id from issue_operation_id for a new operation.'
            : 'This idempotency_key was already used with different arguments; nothing was run. Use a new key for a new operation.',
      },
    };
  },
  reviewRequired(key: string, message?: string): WriteToolResult<never> {
    return {
      outcome: 'failed',
      replayed: false,
      retryable: false,
      ...echo(key),
      error: {
        code: ErrorCode.REVIEW_REQUIRED,
        message:
          message ??
          'This operation is parked for a person: it may already have taken effect. Do not retry it, and do not send it again under a new key; an operator settles it (idempotent-mcp ops list).',
      },
    };
  },
  /**
   * Nothing ran: the person approves the operation on the page at `url` first (a client that cannot send them there
   * itself shows the link). Retryable: a call with the same key after their yes runs once.
   */
  approvalRequired(key: string, approval: { url: string; summary: string; expiresAt: string }): WriteToolResult<never> {
    return {
      outcome: 'in_progress',
      replayed: false,
      retryable: true,
      retry_after_ms: APPROVAL_RETRY_AFTER_MS,
      ...echo(key),
      approval_url: approval.url,
      error: {
        code: ErrorCode.APPROVAL_REQUIRED,
        message:
          `${asSentence(approval.summary)} Nothing ran yet: a person approves this on the approval page first (sign-in required; ` +
          `the link expires at ${approval.expiresAt}). ${APPROVAL_ASK}: ${approval.url}`,
      },
    };
  },
  /** The key may be the very thing refused: only a well-formed one is echoed in full. */
  rejected(key: string, error: ContractError): WriteToolResult<never> {
    return {
      outcome: 'rejected',
      replayed: false,
      retryable: false,
      ...echoShort(key),
      error: { ...error, message: asSentence(error.message) },
    };
  },
};

/**
 * One sentence a model can act on; the text content of every write tool's answer.
 */
export function describeResult(r: WriteToolResult, keyField: KeyField = 'idempotency_key'): string {
  const retry = r.retry_after_ms !== undefined ? ` Retry with the same ${keyField} after ${r.retry_after_ms} ms.` : '';
  switch (r.outcome) {
    case 'succeeded':
      return r.replayed
        ? `Succeeded earlier (replayed result of the first call at ${r.first_executed_at}); nothing was executed again.`
        : 'Succeeded.';
    case 'failed':
      return `Failed (${r.error?.code}): ${asSentence(r.error?.message ?? '')}${r.retryable ? retry : ' Do not retry this call.'}`;
    case 'in_progress':
      if (r.error?.code === ErrorCode.APPROVAL_REQUIRED) return `Approval required (${r.error.code}): ${r.error.message}`;
      return `In progress: the first call with this key is still running.${retry}`;
    case 'unknown':
      return `Outcome unknown, being verified.${retry} Do not use a new key: that could do it twice.`;
    case 'conflict':
      return `Conflict (${r.error?.code}): ${asSentence(r.error?.message ?? '')}`;
    case 'rejected':
      return `Rejected (${r.error?.code}): ${asSentence(r.error?.message ?? '')} Fix the call; retrying it unchanged will not help.`;
  }
}

/** The sentence the model passes to the person with an approval link. */
const APPROVAL_ASK = 'Ask the person to open this link, then call again with the same key';

/**
 * `isError` in MCP terms: everything but a success, and but an approval link. The link is a request to show the
 * person something, not a failure: some clients hide an error's text from the person or retry it on their own (the
 * Vercel AI SDK's retry of failed tool calls), so it travels as a plain result that every client shows the model.
 */
export const isErrorResult = (r: WriteToolResult) => r.outcome !== 'succeeded' && r.error?.code !== ErrorCode.APPROVAL_REQUIRED;

/**
 * Read tools answer an error as one text block, `CODE: message`, with `isError` (their output schemas describe only
 * their results, and MCP clients check any structured content against them). These codes mean the read may succeed
 * if called again shortly; every other code will fail again.
 */
const RETRYABLE_READ_ERRORS: ReadonlySet<string> = new Set([
  ErrorCode.TRANSIENT_FAILURE,
  ErrorCode.STORE_UNAVAILABLE,
  ErrorCode.INTERNAL_ERROR,
]);

/**
 * A read tool's error text, `CODE: message`: the form a client reads the code and whether to call again from
 * (`ReadToolError` answers in it, thrown by a read tool's `execute` or by a read tool's own `call`).
 */
export const readErrorText = (code: string, message: string) => `${code}: ${message}`;

/** The code of a read tool's error text, and whether calling again may help. */
export function parseReadError(text: string): { code: string; retryable: boolean } | undefined {
  const code = /^([A-Z][A-Z_]*): /.exec(text)?.[1];
  return code === undefined ? undefined : { code, retryable: RETRYABLE_READ_ERRORS.has(code) };
}
