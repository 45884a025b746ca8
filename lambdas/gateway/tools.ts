import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import * as z from 'zod';
import {
  ErrorCode,
  TerminalToolError,
  TransientToolError,
  UncertainToolError,
  validateIdempotencyKey,
  type ReconcileFinding,
} from 'idempotent-mcp/engine';
import { defineWriteTool, ReadToolError, type ToolDefinition, type ToolRuntime, type WriteToolDefinition } from 'idempotent-mcp/mcp';
import type { CredentialSource, UpstreamCredential } from './credentials';
import type { LookupMemo } from './lookup-memo';
import { answerText, judgeLookup, prepareLookup, type PreparedLookup } from './lookup';
import { DEFAULT_TIMEOUT_MS, fillSummary, type GatewayPolicy, type WritePolicy } from './policy';
import { UpstreamError, type UpstreamCaller } from './upstream';

/** What the gateway's tools need besides the toolkit's runtime. */
export interface GatewayParts {
  upstream: UpstreamCaller;
  credentials: CredentialSource;
  memo: LookupMemo;
}

/** A write's stored result: the upstream's answer as it came (replayed to every retry with the same key). */
const upstreamResultSchema = z.object({
  content: z.array(z.record(z.string(), z.unknown())),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  /** True when the upstream's answer was lost and the gateway's lookup found the effect (the content then says so). */
  settledByLookup: z.boolean().optional(),
});
type UpstreamResult = z.output<typeof upstreamResultSchema>;

/** The upstream's argument schema as zod, for the gateway's own validation and listing (strict: unknown arguments are refused). */
function inputShape(tool: Tool): z.ZodRawShape {
  const schema = z.fromJSONSchema(tool.inputSchema as Parameters<typeof z.fromJSONSchema>[0]);
  if (!(schema instanceof z.ZodObject)) throw new TypeError(`the upstream's ${tool.name} takes arguments that are not an object`);
  return schema.shape;
}

const NO_CREDENTIAL = (tenant: string) =>
  `The gateway has no upstream credential for tenant ${tenant}; nothing was sent. An operator adds one to the gateway's credentials.`;

const CREDENTIAL_REFUSED = (tenant: string, reason: string, write: boolean) =>
  `${reason.replace(/^the gateway's/, "The gateway's")} (tenant ${tenant}); nothing was sent. Calling again will not help until an operator fixes the gateway's credentials${write ? '; then call with a new key' : ''}.`;

/** The credential could not be read now (Secrets Manager failing, the secret gone): nothing was sent, and nothing final said. */
const CREDENTIAL_UNAVAILABLE = (err: unknown, again: string) =>
  `The gateway's upstream credential could not be read (${(err as Error)?.message}); nothing was sent. ${again}`;

/**
 * A signal for the steps before a write is sent (credentials, discovery, token, connect): it fires a little before
 * the engine's deadline, because at the deadline the engine counts whatever is still running as possibly applied.
 * Aborted first, the call answers "not sent" and its key is free.
 */
function presendSignal(ctx: { deadline: number; now(): number; signal: AbortSignal }): AbortSignal {
  const budget = ctx.deadline - ctx.now();
  const margin = Math.min(1_000, Math.max(50, Math.floor(budget / 10)));
  return AbortSignal.any([ctx.signal, AbortSignal.timeout(Math.max(1, budget - margin))]);
}

const NOT_SENT_IN_TIME =
  "The gateway's upstream credential could not be read in the call's time; nothing was sent. Call again with the same key.";

async function credentialOf(parts: GatewayParts, tenant: string, presend: AbortSignal): Promise<UpstreamCredential> {
  if (presend.aborted) throw new TransientToolError('UPSTREAM_CREDENTIAL_UNAVAILABLE', NOT_SENT_IN_TIME);
  const read = parts.credentials.forTenant(tenant).catch((err: unknown) => {
    throw new TransientToolError('UPSTREAM_CREDENTIAL_UNAVAILABLE', CREDENTIAL_UNAVAILABLE(err, 'Call again with the same key.'));
  });
  let onAbort = () => {};
  const credential = await Promise.race([
    read,
    new Promise<never>((_, reject) => {
      onAbort = () => reject(new TransientToolError('UPSTREAM_CREDENTIAL_UNAVAILABLE', NOT_SENT_IN_TIME));
      presend.addEventListener('abort', onAbort, { once: true });
    }),
  ]).finally(() => presend.removeEventListener('abort', onAbort));
  if (!credential) throw new TerminalToolError(ErrorCode.UNAUTHORIZED, NO_CREDENTIAL(tenant));
  return credential;
}

const KEY_REUSE =
  'This tool is served by a retry-safe gateway in front of the upstream server: a call with a key that already ran returns ' +
  "that call's result and is never sent to the upstream again.";

/** How a write's key reaches the tool (see the policy's `key`). */
function keyDescription(policy: WritePolicy): string {
  const key = policy.key ?? 'idempotency_key';
  if (typeof key === 'object')
    return `${KEY_REUSE} Its argument \`${key.argument}\` is the key: the same ${key.argument} with different arguments is refused as a conflict.`;
  return KEY_REUSE;
}

const DERIVED_KEY_PREFIX = 'sha256:';

/**
 * The record's key for a business key the upstream defines: the value itself when it fits the toolkit's key rules,
 * else a digest of it (a path, an e-mail address), so any string the upstream takes can be the key. A value that
 * itself starts like a digest is digested too: otherwise `"sha256:<hex of x>"` given as is and `x` would share one
 * record (a false conflict, or one's answer replayed to the other). A value that is not a string is passed on as
 * is, and refused by the key check (nothing runs).
 */
function recordKeyOf(value: unknown): unknown {
  if (typeof value !== 'string' || value.length === 0) return value;
  if (!value.startsWith(DERIVED_KEY_PREFIX))
    try {
      return validateIdempotencyKey(value);
    } catch {
      // not a key as it is: digested below
    }
  return `${DERIVED_KEY_PREFIX}${createHash('sha256').update(value).digest('hex')}`;
}

/**
 * The key argument's value as the agent sent it, for the call in progress. The toolkit's write tool takes its key
 * (and `trace_id`) out of the arguments it hands to `execute`; when the upstream's own argument is the key, the
 * upstream must still receive it as sent, digested or not, whatever its name.
 */
const keyArgument = new AsyncLocalStorage<{ value: unknown }>();

/**
 * A lookup up to this size rides on the claim (the record's `memo`): no request of its own. A larger one (a long text
 * the lookup compares) is kept beside the record as before, one request more, so that the record, which every
 * replay reads back, stays small and far from DynamoDB's 400 KB item limit.
 */
const LOOKUP_ON_CLAIM_MAX_BYTES = 16 * 1024;

/**
 * What the claim carries for the reconciler (see `reconcile` below): the call's lookup itself, or word that it is
 * kept beside the record (written after the claim, before the send).
 */
type ClaimMemo = { lookup: PreparedLookup | null } | { beside: true };

function claimMemoOf(lookup: PreparedLookup | null): ClaimMemo {
  return Buffer.byteLength(JSON.stringify(lookup)) <= LOOKUP_ON_CLAIM_MAX_BYTES ? { lookup } : { beside: true };
}

function writeTool(name: string, upstreamTool: Tool, policy: WritePolicy, parts: GatewayParts): ToolDefinition {
  const shape = inputShape(upstreamTool);
  const key = policy.key ?? 'idempotency_key';
  const timeoutMs = policy.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const annotations = upstreamTool.annotations ?? {};
  const retentionSeconds = policy.retentionSeconds;
  const summaryTemplate = policy.summary;
  /** What the upstream receives: the arguments as the agent sent them, the key argument included. */
  const sentArguments = (business: Record<string, unknown>) => {
    const held = keyArgument.getStore();
    return typeof key === 'object' && held ? { ...business, [key.argument]: held.value } : business;
  };
  const lookupOf = (business: Record<string, unknown>, idempotencyKey: string) =>
    policy.reconcile ? (prepareLookup(policy.reconcile, { args: sentArguments(business), key: idempotencyKey }) ?? null) : undefined;

  const inner: WriteToolDefinition = defineWriteTool<z.ZodRawShape, UpstreamResult>({
    name,
    title: upstreamTool.title ?? annotations.title ?? name,
    description: `${upstreamTool.description ?? name}\n\n${keyDescription(policy)}`,
    input: shape,
    result: upstreamResultSchema,
    // MCP's defaults when the upstream says nothing: destructive, open world.
    annotations: { destructiveHint: annotations.destructiveHint ?? true, openWorldHint: annotations.openWorldHint ?? true },
    keySource: key === 'operation_id' ? 'operation_id' : 'client',
    idempotency: {
      executionTimeoutMs: timeoutMs,
      inFlightWindowMs: policy.inFlightWindowMs,
      // Every argument is part of the operation unless the policy says otherwise (the toolkit's defaults would leave
      // out an upstream argument that happens to be called request_id).
      nonBusinessFields: policy.fingerprint?.exclude ?? [],
      ...(retentionSeconds !== undefined ? { retentionSeconds } : {}),
    },
    confirmation: policy.confirmation ?? 'none',
    summarize: (args) =>
      (summaryTemplate !== undefined ? fillSummary(summaryTemplate, args) : undefined) ?? `${name} ${JSON.stringify(args)}`,
    // The lookup rides on the claim: written before `execute` runs, in the claim's own request (see reconcile below).
    ...(policy.reconcile ? { memo: (business, idempotencyKey) => claimMemoOf(lookupOf(business, idempotencyKey)!) } : {}),
    async execute(business, ctx) {
      const args = sentArguments(business);
      const presend = presendSignal(ctx);
      const credential = await credentialOf(parts, ctx.tenant, presend);
      const identity = { tenant: ctx.tenant, tool: name, idempotencyKey: ctx.idempotencyKey };
      const lookup = lookupOf(business, ctx.idempotencyKey);
      if (lookup !== undefined && 'beside' in claimMemoOf(lookup)) {
        // Too large for the claim: written beside the record before the call is sent, so that a missing memo proves
        // the call never left (see reconcile below).
        try {
          await parts.memo.put(identity, lookup, Math.floor(ctx.now() / 1000) + (retentionSeconds ?? 86_400) + 7 * 86_400);
        } catch (err) {
          throw new TransientToolError(
            ErrorCode.STORE_UNAVAILABLE,
            `The gateway could not record how to check this call; nothing was sent. Call again with the same key.`,
            undefined,
            { cause: err },
          );
        }
      }
      let answer: CallToolResult;
      try {
        answer = await parts.upstream.callTool(credential, name, args, {
          signal: ctx.signal,
          presendSignal: presend,
          timeoutMs: Math.max(1, Math.min(timeoutMs, ctx.deadline - ctx.now())),
        });
      } catch (err) {
        if (!(err instanceof UpstreamError))
          throw new UncertainToolError('UPSTREAM_UNCERTAIN', `The upstream's answer is unknown: ${(err as Error)?.message}`, {
            cause: err,
          });
        if (err.failure === 'not_sent')
          throw new TransientToolError('UPSTREAM_UNAVAILABLE', `${err.message}; nothing was sent. Call again with the same key.`, 2000, {
            cause: err,
          });
        // Calling again sends the same credential to the same refusal: a final answer for this key, nothing sent.
        if (err.failure === 'credential_refused')
          throw new TerminalToolError('UPSTREAM_CREDENTIAL_REFUSED', CREDENTIAL_REFUSED(ctx.tenant, err.message, true), { cause: err });
        if (err.failure === 'refused') throw new TerminalToolError('UPSTREAM_REFUSED', err.message, { cause: err });
        throw new UncertainToolError('UPSTREAM_UNCERTAIN', err.message, { cause: err });
      }
      // The upstream's tool ran and said it failed: a business answer, kept and replayed like a success.
      if (answer.isError)
        throw new TerminalToolError(
          'UPSTREAM_TOOL_ERROR',
          answerText(answer).slice(0, 1000) || `the upstream's ${name} answered with an error`,
        );
      return {
        result: {
          content: answer.content as UpstreamResult['content'],
          ...(answer.structuredContent ? { structuredContent: answer.structuredContent as Record<string, unknown> } : {}),
        },
      };
    },
    reconcile: policy.reconcile
      ? async ({ record, signal }): Promise<ReconcileFinding> => {
          // The claim carries the lookup: written in the claim's own request, which the engine completes before the
          // call can be sent, so every record whose outcome is lost (a lost answer, a gateway that died at any point
          // after its claim) has it, and the upstream is asked. Or the claim says the lookup is kept beside the
          // record: missing there, the gateway stopped before it sent the call (that memo is written first, and the
          // call waits for it). A claim that says neither (made under a policy without this lookup) proves nothing.
          const onClaim = record.memo as ClaimMemo | undefined;
          const lookup = onClaim && 'lookup' in onClaim ? onClaim.lookup : await parts.memo.get(record);
          if (lookup === undefined)
            return onClaim
              ? { kind: 'absent' }
              : { kind: 'unreachable', reason: 'the call was claimed without a lookup to check it by: a person decides' };
          if (lookup === null)
            return {
              kind: 'unreachable',
              reason: 'the call lacks an argument the lookup names, so it cannot be checked: a person decides',
            };
          let credential: UpstreamCredential | undefined;
          try {
            credential = await parts.credentials.forTenant(record.tenant);
          } catch (err) {
            return { kind: 'unreachable', reason: `the upstream credential could not be read: ${(err as Error).message}` };
          }
          if (!credential) return { kind: 'unreachable', reason: NO_CREDENTIAL(record.tenant) };
          let answer: CallToolResult;
          try {
            answer = await parts.upstream.callTool(credential, lookup.tool, lookup.arguments, { signal, timeoutMs });
          } catch (err) {
            return { kind: 'unreachable', reason: (err as Error).message };
          }
          const verdict = judgeLookup(lookup, answer);
          if (verdict === 'undecided')
            return { kind: 'unreachable', reason: `the lookup's answer matched neither rule: ${answerText(answer).slice(0, 200)}` };
          if (verdict === 'absent') return { kind: 'absent' };
          const result: UpstreamResult = {
            content: [
              { type: 'text', text: `The upstream applied this call; its answer was lost, and ${lookup.tool} confirmed the effect.` },
            ],
            settledByLookup: true,
          };
          return { kind: 'found', result };
        }
      : undefined,
    onAbsent: 'release',
  });
  if (typeof key !== 'object') return inner;

  // The key is an upstream argument: the tool is listed with the upstream's own arguments, and the argument is both
  // sent upstream as is and the key the gateway runs the call under.
  const listed = z.strictObject(shape);
  return {
    ...inner,
    inputSchema: listed,
    async call(args, call) {
      const value = args?.[key.argument];
      return keyArgument.run({ value }, () => inner.call({ ...(args ?? {}), idempotency_key: recordKeyOf(value) }, call));
    },
  } satisfies WriteToolDefinition;
}

function readTool(name: string, upstreamTool: Tool, parts: GatewayParts): ToolDefinition {
  return {
    kind: 'read',
    name,
    title: upstreamTool.title ?? upstreamTool.annotations?.title ?? name,
    description: upstreamTool.description ?? name,
    inputSchema: z.object(inputShape(upstreamTool)),
    ...(upstreamTool.outputSchema
      ? { outputSchema: z.fromJSONSchema(upstreamTool.outputSchema as Parameters<typeof z.fromJSONSchema>[0]) as z.ZodObject }
      : {}),
    annotations: upstreamTool.annotations ?? { readOnlyHint: true },
    // Reads pass through unchanged: the upstream validates its own arguments and its answer comes back as it is.
    // A refusal of the gateway's own is a ReadToolError: the server answers it as a read tool's (`CODE: message`).
    async call(args, call) {
      let credential: UpstreamCredential | undefined;
      try {
        credential = await parts.credentials.forTenant(call.caller.tenant);
      } catch (err) {
        // Not "no credential for this tenant": one exists and could not be read now.
        throw new ReadToolError('UPSTREAM_CREDENTIAL_UNAVAILABLE', CREDENTIAL_UNAVAILABLE(err, 'A read may be called again.'));
      }
      if (!credential) throw new ReadToolError(ErrorCode.UNAUTHORIZED, NO_CREDENTIAL(call.caller.tenant));
      try {
        return await parts.upstream.callTool(credential, name, args ?? {}, { timeoutMs: DEFAULT_TIMEOUT_MS });
      } catch (err) {
        if (err instanceof UpstreamError && err.failure === 'credential_refused')
          throw new ReadToolError('UPSTREAM_CREDENTIAL_REFUSED', CREDENTIAL_REFUSED(call.caller.tenant, err.message, false));
        throw new ReadToolError('UPSTREAM_UNAVAILABLE', `${(err as Error).message}. A read may be called again.`);
      }
    },
  };
}

/**
 * The tools the gateway serves: each upstream tool the policy names, as a write (keyed, fingerprinted, reconciled)
 * or a read (passed through). Upstream tools the policy does not name are left out (`hidden`): fail closed, a
 * tool nobody classified is neither listed nor callable.
 */
export function gatewayTools<S extends ToolRuntime>(
  policy: GatewayPolicy,
  upstreamTools: readonly Tool[],
  parts: GatewayParts,
): { tools: ToolDefinition<S>[]; hidden: string[] } {
  const tools: ToolDefinition<S>[] = [];
  for (const upstreamTool of upstreamTools) {
    const entry = policy.tools.get(upstreamTool.name);
    if (!entry) continue;
    tools.push(
      (entry.kind === 'write'
        ? writeTool(upstreamTool.name, upstreamTool, entry, parts)
        : readTool(upstreamTool.name, upstreamTool, parts)) as ToolDefinition<S>,
    );
  }
  return { tools, hidden: upstreamTools.map((tool) => tool.name).filter((name) => !policy.tools.has(name)) };
}
