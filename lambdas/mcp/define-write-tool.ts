import type { CallToolResult, InputRequiredResult } from '@modelcontextprotocol/server';
import * as z from 'zod';
import { ErrorCode, IdempotencyError, StoreUnavailableError } from '../core/errors';
import { hashForLog, KEY_MAX_LENGTH, KEY_MIN_LENGTH, validateIdempotencyKey } from '../core/idempotency-key';
import type { AbsentPolicy } from '../core/reconcile';
import { describeResult, isErrorResult, type KeyField, WriteResults, type WriteToolResult } from '../core/result-contract';
import type { IdempotencyPolicy, ToolEffect } from '../core/tool-policy';
import type { Execution, ExecutionContext } from '../engine/write-request';
import { type ConfirmationAsk, secretUnavailable } from '../confirmation/gate';
import { SecretUnavailableError } from '../core/errors';
import { parseArguments } from './arguments';
import { KEY_HEADER_NAMES, X_MCP_HEADER } from './param-headers';
import { CONFIRM_FORM, CONFIRM_INPUT, confirmationRequirement } from './confirmation';
import { visibleText } from '../core/display-text';
import type { ToolAnswer, KeySource, ToolCall, ToolRuntime, WriteToolDefinition } from './tool-types';
import { definedToolName } from './tool-types';

/**
 * What a write tool's `execute` gets: the engine's context (tenant, key, deadline, signal) and the services.
 *
 * @public
 */
export interface WriteToolContext<S extends ToolRuntime = ToolRuntime> extends ExecutionContext {
  /** The server's services: the tool helpers' `ToolRuntime` and the team's own clients. */
  services: S;
}

/**
 * `S`: the services the tool needs (the tool helpers' own `ToolRuntime` plus the team's clients).
 *
 * @public
 */
export interface WriteToolSpec<Shape extends z.ZodRawShape, R, S extends ToolRuntime = ToolRuntime> {
  /** MCP's tool-name charset (`create_order`, `createOrder`, `orders.create`), unique: part of every record's storage key. */
  name: string;
  /** A short human-readable name, for `tools/list` and its annotations. */
  title: string;
  /** What the tool does, for the model. The key's usage is appended for you. */
  description: string;
  /** The business arguments only; the key field and `trace_id` are added for you. */
  input: Shape;
  /** The shape of `result` on success (also what a replay returns). */
  result: z.ZodType<R>;
  /**
   * Stated explicitly because MCP defaults both to true. `destructiveHint`: can it destroy or irreversibly
   * change something (a payment)? `openWorldHint`: does it reach a system outside this service?
   */
  annotations: { destructiveHint: boolean; openWorldHint: boolean };
  /** Retention, expiry, re-execution and timeout settings; the defaults suit most tools. */
  idempotency?: IdempotencyPolicy;
  /**
   * 'local' when `execute` calls nothing outside and its whole effect is the `writes` it returns (own items, an
   * outbox event): record and writes then commit in one DynamoDB request. Default 'external' (claim, call, settle).
   */
  effect?: ToolEffect;
  /**
   * 'client' (default): the caller generates `idempotency_key`. 'operation_id': the caller must first get an id
   * from `issue_operation_id`, bound to its tenant and this tool (high-risk tools, payments).
   */
  keySource?: WriteToolDefinition['keySource'];
  /**
   * Runs at most once per key (the engine decides). Pass `ctx.signal` to every call. A downstream that dedups on a
   * key and is shared by all tenants (one provider account) must get a key unique across tenants: an operation id
   * is (keySource 'operation_id'); a client's `idempotency_key` is unique only within its tenant, so two tenants
   * sending the same one would share one downstream operation and one tenant would get the other's result.
   * Throw TerminalToolError (business rejection, replayed), TransientToolError
   * (known not to have happened, key released) or UncertainToolError (may have happened, reconciled).
   * Return `writes` to commit your own items in the same transaction as the SUCCEEDED record.
   */
  execute(args: z.output<z.ZodObject<Shape>>, ctx: WriteToolContext<S>): Promise<Execution<R>>;
  /**
   * A small JSON value from the arguments and the key, written with the claim (before `execute` runs) and given back
   * to `reconcile` as `request.record.memo`: what asking the downstream takes that the record's fingerprint cannot
   * tell (the gateway's lookup). Part of the claim's one request; keep it a few KB (it is read back with every replay).
   */
  memo?: (args: z.output<z.ZodObject<Shape>>, key: string) => unknown;
  /**
   * Asks the downstream what became of an operation whose outcome was lost, with the tool's services less what only
   * a request uses (see `WriteToolDefinition.reconcile`).
   */
  reconcile?: WriteToolDefinition<S>['reconcile'];
  /** When the downstream confirms absence: 'release' (default, a retry executes) or 'fail'. */
  onAbsent?: AbsentPolicy;
  /**
   * 'approval': the person approves every operation on the endpoint's approval page, signed in (MCP URL-mode
   * elicitation, or the link as an APPROVAL_REQUIRED tool result for a client without it; for payments and whatever
   * authorizes a transaction). 'required': the person confirms every operation
   * in a form the MCP client shows (2026-07-28 clients; 2025-era clients are refused with CONFIRMATION_UNAVAILABLE
   * unless the deployment opts the tool out). Default 'none'. See docs/confirmation.md.
   */
  confirmation?: WriteToolDefinition['confirmation'];
  /** What the person is asked to confirm, from the validated arguments. Required with `confirmation: 'required'`. */
  summarize?: (args: z.output<z.ZodObject<Shape>>) => string;
}

const KEY_PATTERN = '^[A-Za-z0-9._:-]+$';
const IDEMPOTENCY_KEY_DESCRIPTION =
  'Identifies this one intended operation. Generate a new random value (for example a UUID) once per intent and ' +
  'send the same value on every retry of that intent, also after a timeout or error; never generate a new one to retry. ' +
  'Reusing it with different arguments is refused as a conflict.';
const traceIdSchema = z
  .string()
  .max(KEY_MAX_LENGTH)
  .regex(/^[\x21-\x7e]*$/, 'must be printable ASCII without spaces')
  .optional()
  .describe('Optional correlation id for your logs; not part of the operation, so it may differ between retries.');

function keyFieldSchema(keySource: KeySource, tool: string) {
  // Mirrored into the Mcp-Param-* header by 2026-07-28 clients, which servers check against the body (param-headers.ts).
  const header = KEY_HEADER_NAMES[keySource === 'client' ? 'idempotency_key' : 'operation_id'];
  const base = z
    .string()
    .min(KEY_MIN_LENGTH)
    .max(KEY_MAX_LENGTH)
    .regex(new RegExp(KEY_PATTERN))
    .meta({ [X_MCP_HEADER]: header });
  return keySource === 'client'
    ? base.describe(IDEMPOTENCY_KEY_DESCRIPTION)
    : base.describe(
        `A server-issued operation id: call issue_operation_id with { "tool": "${tool}" } once per intended operation, ` +
          'then pass that id here on the first call and on every retry of the same intent. Ids of other tools, tenants ' +
          'or expired ids are refused with UNKNOWN_OPERATION_ID.',
      );
}

function keyUsage(keySource: KeySource, tool: string): string {
  const key =
    keySource === 'client'
      ? 'Requires `idempotency_key`: generate it once per intended operation and reuse it unchanged on every retry; ' +
        'a retry with the same key never runs the operation twice, it returns the first result.'
      : `Requires \`operation_id\` from issue_operation_id { "tool": "${tool}" }: get one per intended operation and ` +
        'reuse it on every retry; a retry never runs the operation twice, it returns the first result.';
  return (
    `${key} The structured result's \`outcome\` is succeeded, failed, in_progress, unknown, conflict or rejected; ` +
    '`retryable` says whether calling again with the same key can help (wait `retry_after_ms` first).'
  );
}

/**
 * The WriteToolResult contract as an output schema, with the tool's own `result`.
 */
function writeResultSchema<R>(result: z.ZodType<R>) {
  return z.object({
    outcome: z.enum(['succeeded', 'failed', 'in_progress', 'unknown', 'conflict', 'rejected']),
    replayed: z.boolean().describe('True when this is the stored answer of an earlier call with the same key.'),
    retryable: z.boolean().describe('Whether calling again with the same key can help.'),
    retry_after_ms: z.number().int().nonnegative().optional(),
    idempotency_key: z
      .string()
      .optional()
      .describe('The key the call ran under (idempotency_key or operation_id); absent when it carried none.'),
    result: result.optional(),
    error: z.object({ code: z.string(), message: z.string() }).optional(),
    first_executed_at: z.string().optional().describe('On a replay: when the operation first ran (ISO 8601).'),
    approval_url: z
      .string()
      .optional()
      .describe('With APPROVAL_REQUIRED: the link the person opens to approve; then call again with the same key.'),
  });
}

/** MCP answer of every write tool: the contract as structured content, one actionable sentence, then the JSON. */
export function toCallToolResult(result: WriteToolResult, keyField: KeyField = 'idempotency_key'): CallToolResult {
  return {
    structuredContent: result as unknown as Record<string, unknown>,
    content: [
      { type: 'text', text: describeResult(result, keyField) },
      // Clients that ignore structuredContent still get the data (MCP: SHOULD also return it serialized).
      { type: 'text', text: JSON.stringify(result) },
    ],
    isError: isErrorResult(result),
  };
}

/**
 * MCP answer of a call whose person is being asked (the engine's `needs_confirmation`): a 2026-07-28 input request
 * (URL or form mode) with the round's `requestState`. A client that answers no input request gets the approval link
 * as a tool result instead (APPROVAL_REQUIRED, from the engine's gate).
 */
function askThePerson(ask: ConfirmationAsk): InputRequiredResult {
  if (ask.via === 'form') {
    return {
      resultType: 'input_required',
      inputRequests: {
        [CONFIRM_INPUT]: { method: 'elicitation/create', params: { mode: 'form', message: ask.message, requestedSchema: CONFIRM_FORM } },
      },
      requestState: ask.requestState,
    };
  }
  return {
    resultType: 'input_required',
    inputRequests: {
      [CONFIRM_INPUT]: {
        method: 'elicitation/create',
        params: { mode: 'url', message: ask.message, url: ask.url, elicitationId: ask.approvalId },
      },
    },
    requestState: ask.requestState!,
  };
}

const rawKeyOf = (value: unknown) => (typeof value === 'string' ? value : '');

/** The key a call runs under; `onlyIfHeld`: an expired operation id, answered only while its record still answers. */
type ResolvedKey = { key: string; onlyIfHeld?: WriteToolResult<never> };

/**
 * THE way to add an idempotent write tool. The helper adds the key field and `trace_id` to the input schema,
 * documents the key, declares the output schema, validates the arguments itself (so a schema failure answers
 * `rejected` + INVALID_ARGUMENTS in the result contract instead of a bare protocol error), runs the engine and
 * maps its answer to MCP.
 * @public
 */
export function defineWriteTool<Shape extends z.ZodRawShape, R, S extends ToolRuntime = ToolRuntime>(
  spec: WriteToolSpec<Shape, R, S>,
): WriteToolDefinition<S> {
  definedToolName('defineWriteTool', spec?.name);
  const keySource = spec.keySource ?? 'client';
  const keyField = keySource === 'client' ? 'idempotency_key' : 'operation_id';
  // Strict: an argument the tool does not declare (a misspelled optional field) is refused, never dropped, and
  // the published schema says so (`additionalProperties: false`).
  const inputSchema = z.strictObject({ [keyField]: keyFieldSchema(keySource, spec.name), ...spec.input, trace_id: traceIdSchema });
  const policy = spec.idempotency ?? {};
  const window = policy.inFlightWindowMs;
  if (window !== undefined && !(Number.isInteger(window) && window >= 0))
    throw new TypeError(
      `defineWriteTool ${spec.name}: idempotency.inFlightWindowMs must be a whole number of milliseconds, 0 or more (got ${String(window)})`,
    );

  /** The key to run under, or the `rejected` answer saying why there is none. */
  async function resolveKey(args: Record<string, unknown>, call: ToolCall<S>): Promise<ResolvedKey | WriteToolResult<never>> {
    const value = args[keyField];
    if (keySource === 'client') {
      try {
        return { key: validateIdempotencyKey(value) };
      } catch (err) {
        if (err instanceof IdempotencyError) return WriteResults.rejected(rawKeyOf(value), { code: err.code, message: err.message });
        throw err;
      }
    }
    const binding = { tenant: call.caller.tenant, tool: spec.name };
    let check: Awaited<ReturnType<typeof call.services.operationIds.verify>>;
    try {
      check = await call.services.operationIds.verify(binding, value);
    } catch (err) {
      if (!(err instanceof SecretUnavailableError)) throw err;
      return secretUnavailable(err, rawKeyOf(value), call.services.logger, spec.name, 'operation_id');
    }
    if (check.valid) return { key: value as string };
    if (check.reason === 'expired') {
      // An expired id still names its operation: a late retry of one that ran must get its result, not a refusal.
      // Only while its record still answers (the engine's one read decides): past the replay window (the record
      // lingers until TTL deletes it) the key is free, and running under an id that expired long ago is refused.
      return {
        key: value as string,
        onlyIfHeld: WriteResults.rejected(value as string, {
          code: ErrorCode.UNKNOWN_OPERATION_ID,
          message: `This operation_id has expired and no result of it is on record; nothing ran. Call issue_operation_id { "tool": "${spec.name}" } for a new one.`,
        }),
      };
    }
    return WriteResults.rejected(rawKeyOf(value), {
      code: ErrorCode.UNKNOWN_OPERATION_ID,
      message: `operation_id must be an id from issue_operation_id { "tool": "${spec.name}" } issued to you for this tool; nothing ran.`,
    });
  }

  const confirmation = spec.confirmation ?? 'none';
  if (confirmation !== 'none' && !spec.summarize)
    throw new Error(`${spec.name}: confirmation '${confirmation}' needs summarize(args), what the person is asked`);

  /** MCP in, the engine decides (the one read of the record, the person's confirmation, the run), MCP out. */
  async function run(rawArgs: Record<string, unknown> | undefined, call: ToolCall<S>): Promise<ToolAnswer> {
    const args = rawArgs ?? {};
    const resolved = await resolveKey(args, call);
    if ('outcome' in resolved) return toCallToolResult(resolved, keyField);
    const { key } = resolved;
    const parsed = parseArguments(inputSchema, args);
    if (!parsed.ok)
      return toCallToolResult(WriteResults.rejected(key, { code: ErrorCode.INVALID_ARGUMENTS, message: parsed.message }), keyField);
    const { trace_id: traceId, [keyField]: _key, ...business } = parsed.data as Record<string, unknown> & { trace_id?: string };
    const requirement =
      confirmation === 'none'
        ? undefined
        : // One line whatever the tool writes: free text in it cannot draw a second line that looks like the summary.
          confirmationRequirement(confirmation, visibleText(spec.summarize!(business as z.output<z.ZodObject<Shape>>)), spec.name, call);
    const answer = await call.services.engine.runConfirmed<R>(
      {
        tenant: call.caller.tenant,
        tool: spec.name,
        idempotencyKey: key,
        args: business,
        traceId,
        remainingTimeMs: call.remainingTimeMs,
        effect: spec.effect,
        likelyReplay: call.likelyReplay,
        onlyIfHeld: resolved.onlyIfHeld,
        memo: spec.memo?.(business as z.output<z.ZodObject<Shape>>, key),
      },
      requirement,
      policy,
      (ctx) => spec.execute(business as z.output<z.ZodObject<Shape>>, { ...ctx, services: call.services }),
    );
    if (answer.outcome === 'needs_confirmation') return askThePerson(answer.ask);
    // The engine speaks of keys; the caller should hear of the field it actually sent.
    return toCallToolResult(answer.outcome === 'conflict' ? WriteResults.conflict(key, keyField) : answer, keyField);
  }

  return {
    kind: 'write',
    name: spec.name,
    title: spec.title,
    description: `${spec.description}\n\n${keyUsage(keySource, spec.name)}`,
    inputSchema,
    outputSchema: writeResultSchema(spec.result),
    annotations: {
      title: spec.title,
      readOnlyHint: false,
      destructiveHint: spec.annotations.destructiveHint,
      // Calling again with the same arguments (the same key included) has no additional effect: that is the point.
      idempotentHint: true,
      openWorldHint: spec.annotations.openWorldHint,
    },
    keySource,
    keyField,
    confirmation,
    idempotency: policy,
    effect: spec.effect ?? 'external',
    reconcile: spec.reconcile,
    onAbsent: spec.onAbsent ?? 'release',
    async call(rawArgs, call) {
      const rawKey = rawKeyOf(rawArgs?.[keyField]);
      try {
        return await run(rawArgs, call);
      } catch (err) {
        // The engine answers every outcome it understands; anything else is ours, and may have happened.
        const storeDown = err instanceof StoreUnavailableError;
        call.services.logger.error('write tool failed unexpectedly', {
          tool: spec.name,
          tenant: call.caller.tenant,
          key_hash: rawKey ? hashForLog(rawKey) : undefined,
          error_name: (err as Error)?.name,
          error_code: (err as { code?: unknown })?.code,
        });
        const message = storeDown
          ? 'The idempotency store is unavailable; call again later with the same key, never with a new one.'
          : 'An internal error interrupted the call; call again later with the same key, never with a new one.';
        return toCallToolResult(
          {
            ...WriteResults.unknown(rawKey, 5000, message),
            error: { code: storeDown ? ErrorCode.STORE_UNAVAILABLE : ErrorCode.INTERNAL_ERROR, message },
          },
          keyField,
        );
      }
    },
  };
}
