import * as z from 'zod';
import { ErrorCode } from '../core/errors';
import { KEY_MAX_LENGTH, KEY_MIN_LENGTH, TOOL_NAME_PATTERN } from '../core/idempotency-key';
import { leaseHasPassed } from '../core/lease';
import { isSettled, keyIsFree } from '../core/state-machine';
import { DEFAULT_POLICY } from '../core/tool-policy';
import { toDeliveryView } from '../outbox/outbox-event';
import type { OutboxStore } from '../outbox/outbox-store';
import { defineReadTool, ReadToolError, type ReadToolContext } from './define-read-tool';
import { isWriteTool, type ToolDefinition, type ToolRuntime } from './tool-types';

const statusSchema = z.object({
  tool: z.string(),
  /** The key as it was asked for: whichever of the two fields the caller passed. */
  idempotency_key: z.string().optional(),
  operation_id: z.string().optional(),
  status: z
    .enum(['not_found', 'processing', 'succeeded', 'failed', 'unknown', 'needs_review'])
    .describe(
      'not_found: nothing ran with this key (or its record expired), so calling the tool with it executes. ' +
        'processing: the first call is still running. unknown: the outcome is being verified (also when a first call ' +
        'stopped without finishing). needs_review: a person must look.',
    ),
  result: z.unknown().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
  /** Until then a call with the same key replays this outcome. */
  replay_until: z.string().optional(),
  delivery: z
    .object({
      event_id: z.string(),
      status: z.enum(['pending', 'delivered', 'failed']),
      result: z.unknown().optional(),
      error: z.object({ code: z.string(), message: z.string() }).optional(),
      sends: z.number().int(),
      updated_at: z.string(),
    })
    .optional()
    .describe('For tools that queue their effect (their result has an event_id): whether it was delivered yet.'),
});

const iso = (ms: number) => new Date(ms).toISOString();

const keySchema = z
  .string()
  .min(KEY_MIN_LENGTH)
  .max(KEY_MAX_LENGTH)
  .regex(/^[A-Za-z0-9._:-]+$/);

/** What get_operation_status reads besides the records: the outbox, where the endpoint has one (its services do). */
type StatusServices = ToolRuntime & { outbox?: Pick<OutboxStore, 'getEvent'> };

/**
 * A queued effect's delivery, read from its outbox event (the event id comes from the tenant's own record). A
 * server without an outbox (your own McpServer with no queued tools) has none to show.
 */
async function deliveryOf(result: unknown, tenant: string, outbox: StatusServices['outbox']) {
  const eventId = (result as { event_id?: unknown } | undefined)?.event_id;
  if (typeof eventId !== 'string' || typeof outbox?.getEvent !== 'function') return {};
  const event = await outbox.getEvent(eventId);
  return event && event.message.tenant === tenant ? { delivery: toDeliveryView(event) } : {};
}

/**
 * What became of a write call, for the write tools of the server that serves it (`ctx.tools`): the endpoint adds it
 * to every tools module with a write tool; on your own McpServer, `registerReadTool` with `tools` puts it there.
 * @public
 */
export const getOperationStatusTool: ToolDefinition = defineReadTool({
  name: 'get_operation_status',
  title: 'Get operation status',
  description:
    'Tells what became of a write tool call: pass the tool name and the key you called it with, as idempotency_key or ' +
    'operation_id (whichever the tool takes). ' +
    'Only your own operations are visible.',
  input: {
    tool: z.string().regex(TOOL_NAME_PATTERN).describe('The name of the write tool that was called, as tools/list lists it.'),
    idempotency_key: keySchema.optional().describe('The idempotency_key of that call (for tools that take one).'),
    operation_id: keySchema.optional().describe('The operation_id of that call (for tools that take one).'),
  },
  result: statusSchema,
  annotations: { openWorldHint: false },
  async execute({ tool, idempotency_key, operation_id }, { services, caller, tools }: ReadToolContext<StatusServices>) {
    const definition = tools.get(tool);
    if (!definition || !isWriteTool(definition)) {
      const writeTools = [...tools.values()].filter(isWriteTool).map((t) => t.name);
      throw new ReadToolError(ErrorCode.INVALID_ARGUMENTS, `tool must be one of the write tools: ${writeTools.join(', ')}.`);
    }
    // Both fields name the same thing, the key the call ran under; one of them, and only one.
    const key = idempotency_key ?? operation_id;
    if (key === undefined || (idempotency_key !== undefined && operation_id !== undefined))
      throw new ReadToolError(ErrorCode.INVALID_ARGUMENTS, `pass the key of the ${tool} call as ${definition.keyField}.`);
    // The tenant is the caller's: another tenant's record with the same key is a different item.
    const record = await services.store.get({ tenant: caller.tenant, tool, idempotencyKey: key });
    const base = { tool, ...(operation_id !== undefined ? { operation_id } : { idempotency_key: key }) };
    // The engine's own rule, under the tool's policy: a record that frees its key answers for nothing any more
    // (TTL deletes it late, DynamoDB Local never).
    const now = services.clock();
    if (!record || keyIsFree(record, now, definition.idempotency.onExpired ?? DEFAULT_POLICY.onExpired))
      return { ...base, status: 'not_found' as const };
    // Past its lease a PROCESSING record runs no more (its executor crashed or was cut off): whether its effect
    // happened is what the reconciler (or a retry, for a tool safe to re-execute) settles next, so: unknown.
    const stale = record.status === 'PROCESSING' && leaseHasPassed(record.leaseExpiresAt, now);
    return {
      ...base,
      status: (stale ? 'unknown' : record.status.toLowerCase()) as z.infer<typeof statusSchema>['status'],
      ...(record.status === 'SUCCEEDED' ? { result: record.result } : {}),
      ...(record.error ? { error: record.error } : {}),
      created_at: iso(record.createdAt),
      updated_at: iso(record.updatedAt),
      ...(isSettled(record.status) ? { replay_until: iso(record.retainUntil) } : {}),
      ...(record.status === 'SUCCEEDED' ? await deliveryOf(record.result, caller.tenant, services.outbox) : {}),
    };
  },
});
