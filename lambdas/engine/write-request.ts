import type { Clock } from '../core/clock';
import type { WriteToolResult } from '../core/result-contract';
import type { ToolEffect } from '../core/tool-policy';
import type { ExtraWrite } from './persistence';

/**
 * What a call brings to the engine (the request, the tool's business function and what it is given) and what the
 * engine answers; the engine itself is engine.ts.
 */

/**
 * What an executor runs with: the call's tenant, tool and key, its deadline and abort signal, the clock, the path it runs on.
 * @public
 */
export interface ExecutionContext {
  /** The caller's tenant, from the verified token. */
  tenant: string;
  /** The tool's name. */
  tool: string;
  /** Pass it downstream wherever the downstream accepts one (Idempotency-Key header, client reference). */
  idempotencyKey: string;
  /** The call's correlation id (the tool's `trace_id` argument), for logs; absent when the caller sent none. */
  traceId?: string;
  /** Epoch ms after which the engine stops waiting and records the outcome as UNKNOWN. */
  deadline: number;
  /** Aborted at the deadline: hand it to every downstream call. */
  signal: AbortSignal;
  /** The engine's clock (epoch ms). */
  now: Clock;
  /**
   * How the call came to run: in one request with its key free ('one_request'), or after claiming its key
   * ('claimed'). 'one_request' (a local tool's first attempt): the writes commit only if the key is free, and a write refused by
   * its own condition sends the call down the claimed path, which runs the tool again with 'claimed'. A read that
   * only guards against items left by an earlier use of the key can wait for that second run.
   */
  path: 'one_request' | 'claimed';
}

/** How a call came to run (`ExecutionContext['path']`). */
export type ExecutionPath = ExecutionContext['path'];

/**
 * What an executor returns: the tool's result, and items to write in the same transaction as its SUCCEEDED record.
 * @public
 */
export interface Execution<R> {
  /** The tool's result: stored with the SUCCEEDED record and replayed to every duplicate. */
  result: R;
  /** Items committed in the same transaction as the SUCCEEDED record (business items, outbox events). */
  writes?: ExtraWrite[];
}

/**
 * The tool's side effect, run at most once per key by the engine.
 * @public
 */
export type Executor<R> = (ctx: ExecutionContext) => Promise<Execution<R>>;

/**
 * One write call as the engine takes it: the tenant, the tool, the key as sent (validated here), the business arguments.
 * @public
 */
export interface WriteRequest {
  /** From the authenticated caller, never from tool arguments. */
  tenant: string;
  /** The tool's name; a malformed one throws (a wiring error, not the caller's). */
  tool: string;
  /** The key as the caller sent it; an invalid one is answered `rejected` and nothing runs. */
  idempotencyKey: unknown;
  /** The business arguments, fingerprinted (less the policy's non-business fields) to tell a retry from a reuse of the key. */
  args: Record<string, unknown>;
  /** Correlation id for logs, kept on the record; not part of the fingerprint. */
  traceId?: string;
  /** The Lambda context's getRemainingTimeInMillis; bounds the execution budget. */
  remainingTimeMs?: () => number;
  /** What the tool's execution touches; 'local' takes the one-request path. Default 'external'. */
  effect?: ToolEffect;
  /**
   * The caller says this key was likely sent before (a client's retry hint; on MCP, `_meta` key
   * `dev.idempotent-mcp/likely-replay` set to `true`): a local
   * tool's record is then read first, as for a key this engine answered. It chooses the order of the requests only:
   * a key found free still goes to the conditional write, so a wrong or forged hint costs one read and no answer.
   */
  likelyReplay?: boolean;
  /**
   * The key may only be answered from its record (an operation id past its expiry still names the operation it
   * ran): a call that finds it free gets this answer instead, and nothing runs.
   */
  onlyIfHeld?: WriteToolResult<never>;
  /** Kept on the record from its claim (`IdempotencyRecord.memo`): what the tool's reconcile needs, at no extra write. */
  memo?: unknown;
}

/**
 * The engine's answer while a person is asked to confirm (nothing ran, nothing was written for the key).
 *
 * @public
 */
export interface NeedsConfirmation {
  /** Tells this answer from a `WriteToolResult`. */
  outcome: 'needs_confirmation';
  /** How the person is asked; the protocol's edge turns it into its own request (an MCP input request). */
  ask:
    | {
        via: 'url';
        /** The approval's id: the link's last segment, the ask's id. */
        approvalId: string;
        url: string;
        /** What the person reads beside the link. */
        message: string;
        /** The round's token, for a client that answers asks. */
        requestState: string | undefined;
      }
    | { via: 'form'; message: string; requestState: string };
}

/** What `runConfirmed` answers: the result contract, or the ask while the person is asked. */
export type EngineAnswer<R> = WriteToolResult<R> | NeedsConfirmation;
