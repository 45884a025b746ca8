import type { FetchLike } from '@modelcontextprotocol/client';
import type { Clock } from '../lambdas/core/clock';
import type { WriteToolResult } from '../lambdas/core/result-contract';
import type { CallLedger, LedgerEntry } from './call-ledger';
import type { RetryOptions, TransportFailure } from './retry';

import type { ApprovalLink } from './approval-links';

/*
 * What the client is given (`IdempotentClientOptions`), what a call asks and what it answers: the shapes of
 * `IdempotentMcpClient` (idempotent-client.ts), apart from how it gets there.
 */

/**
 * Options of `IdempotentMcpClient`: the server's URL, the token and headers it sends, the fetch it uses, its session, ledger and retries.
 * @public
 */
export interface IdempotentClientOptions {
  /** The MCP endpoint, e.g. http://127.0.0.1:3000/mcp. */
  url: string | URL;
  /** Bearer token sent on every request. */
  token?: string;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** The fetch under the transport: the seam for proxies, instrumentation and fault injection. */
  fetch?: FetchLike;
  /** The conversation or agent run the calls belong to; part of every intent's identity. Default "default". */
  session?: string;
  /** Where keys are kept; pass `await CallLedger.open({ file })` to keep them across restarts. Default: in memory. */
  ledger?: CallLedger;
  /**
   * Attempts and time budget of each retried step (the write, a read, the tool list, an operation id request); the
   * fields given replace their defaults.
   */
  retry?: RetryOptions;
  /**
   * Tools that take a server-issued `operation_id` instead of a client key. Default: learnt from the server, once
   * per client (`tools/list`: the tools whose input schema requires `operation_id`).
   */
  operationIdTools?: readonly string[];
  /** Arguments that do not change the intent (must match the server's policy). Default: trace_id, request_id, requested_at. */
  nonBusinessFields?: readonly string[];
  /** One attempt's limit; past it the attempt counts as a transport failure and is retried with the same key. Default 20 s. */
  requestTimeoutMs?: number;
  /** The name and version the client announces when it connects (MCP `clientInfo`). Default idempotent-mcp-client 0.1.0. */
  clientInfo?: { name: string; version: string };
  /**
   * The MCP protocol era: 'auto' speaks 2026-07-28 where the server does (server/discover) and the 2025 handshake
   * otherwise; 'legacy' always the 2025 handshake (protocol version 2025-11-25), for a server or gateway that should
   * see only 2025-era requests. Approval links work in both. Default 'auto'.
   */
  protocolEra?: 'auto' | 'legacy';
  /**
   * Asks the person to confirm an operation the server wants confirmed (a tool with confirmation 'required', over
   * MCP 2026-07-28): `message` is what to show; resolve true for an explicit yes. Without it the client declares no
   * form capability and such tools answer `rejected` / CONFIRMATION_UNAVAILABLE.
   */
  confirm?: (request: { message: string }) => boolean | Promise<boolean>;
  /**
   * Shows the person the approval link of a tool with confirmation 'approval' (MCP URL-mode elicitation: a
   * 2026-07-28 `input_required`, or the APPROVAL_REQUIRED tool result a 2025-11-25 connection gets): the client waits while they
   * sign in and decide on that page, retrying the same call with the same key. Called once
   * per link (again only when an expired link is replaced). Default: prints the link to stderr.
   */
  onApprovalLink?: (link: ApprovalLink) => void | Promise<void>;
  /** Also opens each approval link in the person's browser (xdg-open, open, explorer); a failure to open is ignored. Default false. */
  openApprovalLinks?: boolean;
  /** How long to wait for the person's decision on one link before giving up (one expired link is replaced once). Default 15 min. */
  approvalWaitMs?: number;
  /** The wait between retries while the person has not decided. Default 2 s. */
  approvalPollMs?: number;
  /** Called after every attempt of a write, before any wait: for logs and progress displays. */
  onAttempt?: (event: AttemptEvent) => void;
  /** A number in [0, 1) per backoff wait: its share of the wait's ceiling (full jitter). Default `Math.random`. */
  random?: () => number;
  /** Waits `ms` milliseconds: between attempts and between approval polls. Default a `setTimeout`. */
  sleep?: (ms: number) => Promise<void>;
  /**
   * Epoch ms, for the retry time budget, the approval wait and the default ledger (a given `ledger` keeps its own).
   * Default `Date.now`.
   */
  clock?: Clock;
}

/**
 * A write the agent wants done.
 *
 * @public
 */
export interface WriteCallRequest {
  /** The write tool to call: 1 to 128 of A-Z a-z 0-9 _ - . (another name makes `callWrite` throw). */
  tool: string;
  /** The tool's arguments; any idempotency_key or operation_id in them is replaced by the intent's own. */
  args: Record<string, unknown>;
  /**
   * Names the intent when the host knows it (a plan step, "confirmation email for order 42"). Then the name,
   * not the arguments, identifies the call: a re-plan with reworded arguments keeps the key, and the server
   * answers `conflict` rather than doing it twice. A different name is a different intent, even with equal arguments.
   */
  intent?: string;
}

/**
 * What became of a write: the state, the server's last answer or why there was none, and a status line.
 *
 * @public
 */
export interface WriteCall<R = unknown> {
  /** The tool called (the request's `tool`). */
  tool: string;
  /** The request's `intent`; absent when it named none. */
  intent?: string;
  /** The key the server deduplicates on ('' if no operation id could be obtained). */
  key: string;
  /** Which argument carries `key`; `idempotency_key` when the server's tool list could not be read. */
  keyKind: LedgerEntry['keyKind'];
  /**
   * The intent's state in the ledger after this call. With no ledger entry (no tool list, or no operation id
   * obtained: nothing sent), `submitted` after a transport failure (call again later) and `failed` otherwise.
   */
  state: LedgerEntry['state'];
  /** The last answer in the result contract, if any arrived. */
  result?: WriteToolResult<R>;
  /** Why the last attempt got no answer in the contract. */
  failure?: TransportFailure;
  /** Requests sent by this call (not counting earlier calls of the same intent). */
  attempts: number;
  /** Whether this call started the intent (false: a re-plan or a retry of a known one). */
  newIntent: boolean;
  /** One line for the model's context. */
  status: string;
}

/**
 * One attempt of a write, as `onAttempt` reports it.
 *
 * @public
 */
export interface AttemptEvent {
  /** The write tool called (the request's `tool`). */
  tool: string;
  /** The intent's key as the ledger holds it after this attempt (a replaced, expired operation id: the new one). */
  key: string;
  /** 1 for the first request of this call. */
  attempt: number;
  /** The status line of this attempt's answer (or of its failure). */
  status: string;
  /** The wait before the next attempt; absent when this attempt was the last. */
  nextDelayMs?: number;
}

/**
 * The answer of a read tool call: its structured content, its text, whether it is an error.
 * @public
 */
export interface ReadCall {
  /** The answer's structured content; absent when it had none or no answer arrived. */
  structuredContent?: Record<string, unknown>;
  /** True when the tool answered with `isError`, or when no answer arrived. */
  isError: boolean;
  /** The text content, joined. */
  text: string;
  /**
   * Why the last attempt got no answer, or (kind `transport`, the answer kept) that the server refused the read for
   * now (a retryable error) and the retries were spent. Absent after any other answer.
   */
  failure?: TransportFailure;
  /** Attempts this call made, the first included: at most `retry.maxAttempts`. */
  attempts: number;
}
