import type { CallToolResult, InputRequiredResult, ToolAnnotations } from '@modelcontextprotocol/server';
import type { z } from 'zod';
import type { Caller } from '../auth/verifier';
import type { AbsentPolicy, ReconcileFinding, ReconcileRequest } from '../core/reconcile';
import type { IdempotencyPolicy, ToolEffect } from '../core/tool-policy';
import type { IdempotencyEngine } from '../engine/engine';
import type { IdempotencyStore } from '../engine/persistence';
import type { Clock } from '../core/clock';
import { validateToolName } from '../core/idempotency-key';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { OperationIdSigner } from '../engine/signers';
import type { ConfirmationSigner } from '../confirmation/signer';
import type { ApprovalStore } from '../confirmation/approval-store';

/** The signers are the engine's (lambdas/engine/signers.ts): its confirmation gate calls the round signer. */
export type { ConfirmationSigner, OperationIdSigner };

/**
 * What the tool helpers themselves need of a server's services: the engine and its store, the clock, a logger, and
 * the signers of operation ids and confirmations. A team's own services type adds its clients to these; its tools
 * are typed against it (`defineWriteTool<..., MyServices>`), and no project-wide Services object is imposed.
 * @public
 */
export interface ToolRuntime {
  /** Runs every write tool's call: claim, execute once, settle, answer duplicates. */
  engine: IdempotencyEngine;
  /** Read by `get_operation_status` (the engine's store). */
  store: Pick<IdempotencyStore, 'get'>;
  /** Epoch ms; the engine's. */
  clock: Clock;
  /** Where the tool helpers log (unexpected tool errors, an unreadable signing key); never keys or arguments. */
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Issues (`issue_operation_id`) and checks the operation ids of tools with `keySource: 'operation_id'`. */
  operationIds: OperationIdSigner;
  /** Signs and checks the round tokens of a person's confirmation. */
  confirmations: ConfirmationSigner;
  /**
   * Tools whose confirmation 2025-era clients do on their side (the endpoint's `confirmationOptOut`); tools with
   * `confirmation: 'approval'` that a client without URL elicitation may confirm in a form (confirmationFormFallback);
   * the base of the approval page's links (derived from the request when unset). How long an approval link lives is
   * the engine's confirmation gate's (`EngineOptions.confirmation`), set once.
   */
  config: {
    confirmationOptOut: readonly string[];
    confirmationFormFallback?: readonly string[];
    publicBaseUrl?: string;
    approvalBaseUrl?: string;
  };
  /**
   * The decisions of people on approvals and confirmations, each decided once (MRTR: a decided requestState cannot
   * be answered again). Without it, `confirmation: 'approval'` tools are refused and form answers are not recorded.
   */
  approvals?: ApprovalStore;
}

/**
 * Everything one `tools/call` needs besides its arguments; built per HTTP request.
 *
 * @public
 */
export interface ToolCall<S extends ToolRuntime = ToolRuntime> {
  /** The server's services: the tool helpers' `ToolRuntime` and the team's own clients. */
  services: S;
  /** The authenticated caller: the only source of the tenant. */
  caller: Caller;
  /** The Lambda's remaining time, so an execution never outlives its invocation. */
  remainingTimeMs?: () => number;
  /** The tools this server exposes, by name. */
  tools: ReadonlyMap<string, ToolDefinition<S>>;
  /** 'modern': a 2026-07-28 request, which can answer an input request; 'legacy': a 2025-era one, which cannot. */
  era?: 'legacy' | 'modern';
  /** A 2026-07-28 retry's answers to the input requests of the round before (untrusted: validate them). */
  inputResponses?: Record<string, unknown>;
  /** The `requestState` that retry echoes (untrusted: verify it). */
  requestState?: string;
  /** Whether the client of a 2026-07-28 request declared it can show a form to the person. */
  canElicitForms?: boolean;
  /** Whether the client of a 2026-07-28 request declared it can send the person to a URL (`elicitation.url`). */
  canElicitUrls?: boolean;
  /** The protocol version of the request (what the person's confirmation can be asked through). */
  protocolVersion?: string;
  /** The origin the request came to (the approval page's links, when no public base URL is set). */
  origin?: string;
  /**
   * The request's `_meta` says the client sends this key again (`dev.idempotent-mcp/likely-replay` set to `true`):
   * a hint for the engine.
   */
  likelyReplay?: boolean;
}

/** A tool's answer: a result, or a request for the person's input before it can run (`ToolDefinition.call`'s). */
export type ToolAnswer = Awaited<ReturnType<ToolDefinition['call']>>;

/**
 * A tool as the MCP server sees it: metadata for `tools/list` and one call function.
 *
 * @public
 */
export interface ToolDefinition<S extends ToolRuntime = ToolRuntime> {
  /** 'write': a `WriteToolDefinition`, whose calls the engine runs once per key; 'read': called as is. */
  kind: 'read' | 'write';
  /** The tool's name in `tools/list` and `tools/call`. */
  name: string;
  /** A short human-readable name, for `tools/list`. */
  title: string;
  /** What the tool does, for the model (`tools/list`). */
  description: string;
  /** Advertised in `tools/list`; arguments are validated against it by the tool itself. */
  inputSchema: z.ZodObject;
  /** Unset: the tool declares no output schema (a gateway's read passing on an upstream tool that declares none). */
  outputSchema?: z.ZodObject;
  /** MCP tool annotations (`readOnlyHint`, `idempotentHint`, ...), advertised in `tools/list`. */
  annotations: ToolAnnotations;
  /**
   * Runs one `tools/call`: a result, or a request for the person's input before the tool can run. A read tool written
   * by hand (a gateway's pass-through read) may throw `ReadToolError` for an expected refusal: the server answers it
   * as a read tool's refusal (`CODE: message`, `isError`), as it does for `defineReadTool`'s. A write tool's answer is
   * its result contract: from a write tool it is an error like any other.
   */
  call(args: Record<string, unknown> | undefined, call: ToolCall<S>): Promise<CallToolResult | InputRequiredResult>;
}

/**
 * A write tool also tells the reconciler how to settle its lost outcomes.
 *
 * @public
 */
export interface WriteToolDefinition<S extends ToolRuntime = ToolRuntime> extends ToolDefinition<S> {
  /** Always 'write'. */
  kind: 'write';
  /** Every write declares the result contract. */
  outputSchema: z.ZodObject;
  /** Where the key comes from: the client's `idempotency_key`, or an `operation_id` the server issued. */
  keySource: 'client' | 'operation_id';
  /** The argument carrying the key: `idempotency_key` or `operation_id`. */
  keyField: 'idempotency_key' | 'operation_id';
  /** 'required': the person confirms each operation in a form; 'approval': on the endpoint's approval page, signed in. */
  confirmation: 'approval' | 'required' | 'none';
  /** The tool's idempotency policy (retention, what follows expiry, execution timeout), as the engine applies it. */
  idempotency: IdempotencyPolicy;
  /** 'local': record and writes commit in one request (see WriteToolSpec.effect). */
  effect: ToolEffect;
  /**
   * Asks the downstream what became of an UNKNOWN or stale operation. Without it such records go to review. Its
   * `services` are the tool's without the parts only a request uses (the engine, the signers, the request settings):
   * the reconciler runs outside any request, so it builds none of those; it passes its own store, clock and logger
   * and the clients the tools module adds.
   */
  reconcile?: (
    request: ReconcileRequest,
    services: Omit<S, 'engine' | 'operationIds' | 'confirmations' | 'config' | 'approvals'>,
  ) => Promise<ReconcileFinding>;
  /** What the reconciler does when the downstream confirms the effect absent: release the key or fail the operation. */
  onAbsent: AbsentPolicy;
}

/** Where a write tool's key comes from (`WriteToolDefinition.keySource`). */
export type KeySource = WriteToolDefinition['keySource'];

/** What a reconcile hook gets (`WriteToolDefinition.reconcile`'s `services`). */
export type ReconcileServices<S extends ToolRuntime = ToolRuntime> = Parameters<NonNullable<WriteToolDefinition<S>['reconcile']>>[1];

/** A tool's name checked where it is defined, so a bad one fails at import (deploy, start) naming the helper. */
export function definedToolName(helper: 'defineWriteTool' | 'defineReadTool', name: unknown): string {
  try {
    return validateToolName(name);
  } catch (err) {
    throw new TypeError(`${helper}: ${(err as Error).message}`);
  }
}

export const isWriteTool = <S extends ToolRuntime>(tool: ToolDefinition<S>): tool is WriteToolDefinition<S> => tool.kind === 'write';
