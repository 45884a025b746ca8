import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/client';
import type { Outcome, WriteToolResult } from '../lambdas/core/result-contract';
import type { CallState } from './call-ledger';

/*
 * Reading a tool's answer: the result contract in its structuredContent, the ledger state an outcome leaves, the
 * key of a new intent, and which tools take a server-issued operation id.
 */

const OUTCOMES: ReadonlySet<string> = new Set<Outcome>(['succeeded', 'failed', 'in_progress', 'unknown', 'conflict', 'rejected']);

export const STATE_OF: Record<Outcome, CallState> = {
  succeeded: 'succeeded',
  failed: 'failed',
  rejected: 'failed',
  conflict: 'failed',
  in_progress: 'in_progress',
  unknown: 'unknown',
};

/**
 * 144 random bits, base64url: inside the server's key charset (A-Za-z0-9._:-) and length (8..128).
 *
 */
export function newIdempotencyKey(): string {
  return `ik_${randomBytes(18).toString('base64url')}`;
}

/**
 * The result contract, if this structuredContent carries it.
 *
 */
export function asWriteToolResult(content: unknown): WriteToolResult | undefined {
  if (!content || typeof content !== 'object') return undefined;
  const r = content as Record<string, unknown>;
  const valid =
    typeof r.outcome === 'string' &&
    OUTCOMES.has(r.outcome) &&
    typeof r.retryable === 'boolean' &&
    typeof r.replayed === 'boolean' &&
    (r.idempotency_key === undefined || typeof r.idempotency_key === 'string') &&
    (r.retry_after_ms === undefined || typeof r.retry_after_ms === 'number');
  return valid ? (r as unknown as WriteToolResult) : undefined;
}

export const textOf = (answer: CallToolResult) =>
  answer.content
    .map((block) => (block.type === 'text' ? block.text : ''))
    .filter(Boolean)
    .join(' ');

export const SETTLED_STATES: ReadonlySet<CallState> = new Set(['succeeded', 'failed']);

export const IDENTITY_ARGUMENTS = ['idempotency_key', 'operation_id'];

/** A listed tool takes a server-issued id when its input schema requires `operation_id` (defineWriteTool's key field). */
export function takesOperationId(inputSchema: { required?: unknown } | undefined): boolean {
  return Array.isArray(inputSchema?.required) && inputSchema.required.includes('operation_id');
}
