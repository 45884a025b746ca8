import { AsyncLocalStorage } from 'node:async_hooks';
import { type CallToolResult, Client, type FetchLike, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { systemClock, type Clock } from '../lambdas/core/clock';
import { DEFAULT_NON_BUSINESS_FIELDS, fingerprint } from '../lambdas/core/fingerprint';
import { ErrorCode } from '../lambdas/core/errors';
import { validateToolName } from '../lambdas/core/idempotency-key';
import { LIKELY_REPLAY_META_KEY } from '../lambdas/core/replay-hint';
import { withRequestSignals } from '../lambdas/core/request-signals';
import { parseReadError, type WriteToolResult } from '../lambdas/core/result-contract';
import { CallLedger, identityId, type CallIdentity, type CallState, type LedgerEntry } from './call-ledger';
import {
  DEFAULT_RETRY,
  HttpStatusError,
  backoffDelay,
  classifyCallError,
  isRetryableHttpStatus,
  parseRetryAfter,
  type ResolvedRetryOptions,
  type TransportFailure,
} from './retry';
import { statusLine } from './status-line';
import {
  ApprovalNotGivenError,
  approvalLinkOf,
  defaultShowLink,
  openInBrowser,
  type ApprovalLink,
  type ApprovalWait,
} from './approval-links';
import type { AttemptEvent, IdempotentClientOptions, ReadCall, WriteCall, WriteCallRequest } from './client-options';
import {
  asWriteToolResult,
  IDENTITY_ARGUMENTS,
  newIdempotencyKey,
  SETTLED_STATES,
  STATE_OF,
  takesOperationId,
  textOf,
} from './tool-answers';

// The public names declared beside the client, where exports/client.ts finds them.
export type { ApprovalLink } from './approval-links';
export type { AttemptEvent, IdempotentClientOptions, ReadCall, WriteCall, WriteCallRequest } from './client-options';
export { newIdempotencyKey } from './tool-answers';

interface Attempt {
  answer?: CallToolResult;
  failure?: TransportFailure;
  /** False when the connection never opened: the request cannot have reached the server. */
  sent: boolean;
}

/**
 * An MCP client for write tools that must not run twice: every intent gets one key, kept in a ledger across
 * retries, re-plans and (with a file) restarts; only what can help is retried, always with that key.
 * @public
 */
export class IdempotentMcpClient {
  /** The session all of this client's intents belong to (`options.session`, default "default"). */
  readonly session: string;
  /** Each intent's key and state: `options.ledger`, or an in-memory ledger on `options.clock`. */
  readonly ledger: CallLedger;
  private readonly url: URL;
  private readonly requestInit: RequestInit;
  private readonly fetchSeam: FetchLike;
  private readonly retry: ResolvedRetryOptions;
  /** Given, or learnt from the server's tool list on the first new intent. */
  private operationIdTools: ReadonlySet<string> | undefined;
  private readonly nonBusinessFields: readonly string[];
  private readonly requestTimeoutMs: number;
  private readonly clientInfo: { name: string; version: string };
  private readonly protocolEra: 'auto' | 'legacy';
  private readonly confirm: IdempotentClientOptions['confirm'];
  private readonly onAttempt: ((event: AttemptEvent) => void) | undefined;
  private readonly showApprovalLink: (link: ApprovalLink) => void | Promise<void>;
  private readonly openApprovalLinks: boolean;
  private readonly approvalWaitMs: number;
  private readonly approvalPollMs: number;
  /** The approval wait of the write call being run (the elicitation handler runs inside it). */
  private readonly approvalWaits = new AsyncLocalStorage<ApprovalWait>();
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly clock: Clock;
  private connecting: Promise<Client> | undefined;
  /** One call per intent at a time: a concurrent duplicate waits and then gets the replay, and ids are issued once. */
  private readonly intentLocks = new Map<string, Promise<unknown>>();
  /** Operation ids this client obtained as replacements: never replaced again, so a refusal cannot loop. */
  private readonly renewedKeys = new Set<string>();

  constructor(options: IdempotentClientOptions) {
    this.url = new URL(options.url);
    this.session = options.session ?? 'default';
    this.clock = options.clock ?? systemClock;
    this.ledger = options.ledger ?? new CallLedger({ clock: this.clock });
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.operationIdTools = options.operationIdTools ? new Set(options.operationIdTools) : undefined;
    this.nonBusinessFields = options.nonBusinessFields ?? DEFAULT_NON_BUSINESS_FIELDS;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 20_000;
    this.clientInfo = options.clientInfo ?? { name: 'idempotent-mcp-client', version: '0.1.0' };
    this.protocolEra = options.protocolEra ?? 'auto';
    this.confirm = options.confirm;
    this.onAttempt = options.onAttempt;
    this.showApprovalLink = options.onApprovalLink ?? defaultShowLink;
    this.openApprovalLinks = options.openApprovalLinks ?? false;
    this.approvalWaitMs = options.approvalWaitMs ?? 15 * 60_000;
    this.approvalPollMs = options.approvalPollMs ?? 2000;
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.requestInit = {
      headers: { ...options.headers, ...(options.token ? { Authorization: `Bearer ${options.token}` } : {}) },
    };
    const baseFetch: FetchLike = options.fetch ?? ((url, init) => fetch(url, init));
    // The SDK reports an HTTP failure without its headers; raising it here keeps Retry-After. The session's connection
    // is kept for every call: each request gets its own abort signal, so listeners do not pile up on the transport's.
    this.fetchSeam = withRequestSignals(async (url, init) => {
      const response = await baseFetch(url, init);
      if (isRetryableHttpStatus(response.status)) {
        await response.body?.cancel().catch(() => undefined);
        throw new HttpStatusError(response.status, parseRetryAfter(response.headers.get('retry-after'), Date.now()));
      }
      return response;
    });
  }

  /**
   * Calls a write tool for an intent. Never throws for what the server or the network did: the answer, or the
   * reason there is none, is in the returned call, with a status line for the model.
   */
  async callWrite<R = unknown>(request: WriteCallRequest): Promise<WriteCall<R>> {
    const tool = validateToolName(request.tool);
    const identity: CallIdentity = {
      session: this.session,
      tool,
      ...(request.intent !== undefined ? { intent: request.intent } : {}),
      fingerprint: fingerprint(request.args, this.nonBusinessFields),
    };
    const wait: ApprovalWait = { tool, links: [], shownAt: 0 };
    return this.exclusive(identityId(identity), () => this.approvalWaits.run(wait, () => this.runWrite<R>(request, identity)));
  }

  /** Calls a read-only tool, retrying transport failures (a read can be repeated freely). */
  async callRead(tool: string, args: Record<string, unknown> = {}): Promise<ReadCall> {
    let last: Attempt = { sent: false };
    const attempts = await this.retrying(async () => {
      last = await this.attemptToolCall(validateToolName(tool), args);
      // A read refused for now (the server's store or key briefly unavailable) is tried again, like a lost answer.
      const refused = last.answer?.isError ? parseReadError(textOf(last.answer)) : undefined;
      if (refused?.retryable) {
        last = { ...last, failure: { kind: 'transport', message: `${tool} answered ${refused.code}` } };
        return { done: false };
      }
      return { done: last.answer !== undefined || last.failure?.kind === 'deterministic', retryAfterMs: last.failure?.retryAfterMs };
    });
    const answer = last.answer;
    return {
      ...(answer?.structuredContent ? { structuredContent: answer.structuredContent as Record<string, unknown> } : {}),
      isError: answer ? answer.isError === true : true,
      text: answer ? textOf(answer) : '',
      ...(last.failure ? { failure: last.failure } : {}),
      attempts,
    };
  }

  /** Closes the connection and waits for pending ledger writes. */
  async close(): Promise<void> {
    const connecting = this.connecting;
    this.connecting = undefined;
    const client = await connecting?.catch(() => undefined);
    await client?.close();
    await this.ledger.persist().catch(() => undefined);
  }

  private async runWrite<R>(request: WriteCallRequest, identity: CallIdentity): Promise<WriteCall<R>> {
    const tool = identity.tool;
    let entry = this.ledger.find(identity);
    const newIntent = entry === undefined;
    let keyKind: LedgerEntry['keyKind'] = entry?.keyKind ?? 'idempotency_key';
    if (!entry) {
      // Nothing was sent for this intent yet: a failure to learn its key kind or to get its id leaves nothing behind
      // (no key, no ledger entry); a transport failure leaves the intent to be called again later.
      const refused = (failure: TransportFailure, attempts: number): WriteCall<R> => {
        const call = {
          tool,
          key: '',
          state: failure.kind === 'transport' ? ('submitted' as const) : ('failed' as const),
          attempts,
          failure,
        };
        return {
          ...call,
          keyKind,
          newIntent,
          status: statusLine(call),
          ...(request.intent !== undefined ? { intent: request.intent } : {}),
        };
      };
      const known = await this.operationIdToolNames();
      if ('failure' in known) return refused(known.failure, known.attempts);
      keyKind = known.names.has(tool) ? 'operation_id' : 'idempotency_key';
      let key: string;
      if (keyKind === 'operation_id') {
        const issued = await this.issueOperationId(tool);
        if ('failure' in issued) return refused(issued.failure, known.attempts + issued.attempts);
        key = issued.operationId;
      } else {
        key = newIdempotencyKey();
      }
      entry = this.ledger.create(identity, key, keyKind);
      // Durable before the first send: a restart after this point reuses the key instead of minting another.
      await this.ledger.persist();
    }

    const args = Object.fromEntries(Object.entries(request.args).filter(([name]) => !IDENTITY_ARGUMENTS.includes(name)));
    args[keyKind] = entry.key;
    const current = entry;
    const argumentNames = Object.keys(request.args);
    let result: WriteToolResult<R> | undefined;
    let failure: TransportFailure | undefined;
    let sentAny = false;
    const snapshot = () => ({
      tool,
      key: current.key,
      state: current.state,
      ...(result ? { result } : {}),
      ...(failure ? { failure } : {}),
    });

    const attempts = await this.retrying(
      async () => {
        // This key may have reached the server before (a retry, a re-plan): the request says so, and the server reads
        // the key's record first instead of sending a write that would be refused. Never on a key's first send.
        const attempt = await this.attemptToolCall(tool, args, current.sent === true ? { [LIKELY_REPLAY_META_KEY]: true } : undefined);
        sentAny ||= attempt.sent;
        let state: CallState;
        let done: boolean;
        let retryAfterMs: number | undefined;
        const contract = attempt.answer ? asWriteToolResult(attempt.answer.structuredContent) : undefined;
        if (contract && (await this.renewedExpiredOperationId(contract, current, args))) {
          // The server said nothing ran with the old id: the same intent continues under a new one.
          result = contract as WriteToolResult<R>;
          failure = undefined;
          this.ledger.update(current, { attempts: current.attempts + 1, lastError: contract.error?.code ?? '', sent: false });
          return { done: false, retryAfterMs: 0 };
        }
        if (contract) {
          result = contract as WriteToolResult<R>;
          failure = undefined;
          // A final answer settled the intent; a later "not now" (the server's store unreachable, a verification
          // under way) says nothing new about it and must not turn a success into a failure or an unknown.
          state = current.final && contract.retryable ? current.state : STATE_OF[contract.outcome];
          done = !contract.retryable;
          retryAfterMs = contract.retry_after_ms;
        } else {
          failure = attempt.answer
            ? { kind: 'deterministic', message: `answer without the result contract: ${textOf(attempt.answer).slice(0, 120)}` }
            : attempt.failure;
          done = failure?.kind !== 'transport';
          retryAfterMs = failure?.retryAfterMs;
          // What an earlier answer settled stays known (the server replays it). Otherwise a request that may have
          // arrived is unknown until the server says more; one that cannot have arrived changes nothing.
          if (SETTLED_STATES.has(current.state) || current.state === 'unknown') state = current.state;
          else if (failure?.kind === 'transport') state = sentAny ? 'unknown' : current.state;
          else state = 'failed';
        }
        this.ledger.update(current, {
          state,
          final: current.final || contract?.retryable === false,
          attempts: current.attempts + 1,
          sent: current.sent === true || attempt.sent,
          ...(result ? { lastOutcome: result.outcome } : {}),
          lastError: failure?.message ?? result?.error?.code ?? '',
        });
        return { done, retryAfterMs };
      },
      async (attempt, nextDelayMs) => {
        if (this.onAttempt) {
          const status = statusLine({ ...snapshot(), attempts: 1, argumentNames });
          this.onAttempt({ tool, key: current.key, attempt, status, ...(nextDelayMs !== undefined ? { nextDelayMs } : {}) });
        }
        // The key is already durable; writing the state is best effort.
        await this.ledger.persist().catch(() => undefined);
      },
    );

    const call = { ...snapshot(), attempts };
    const status = statusLine({ ...call, argumentNames });
    this.ledger.update(current, { status });
    await this.ledger.persist().catch(() => undefined);
    return { ...call, keyKind, newIntent, status, ...(request.intent !== undefined ? { intent: request.intent } : {}) };
  }

  /**
   * An operation id outlived by its ledger entry (ids expire after an hour, entries live longer) is refused with
   * UNKNOWN_OPERATION_ID only when nothing ran with it; then, once per call, the intent gets a fresh id.
   */
  private async renewedExpiredOperationId(result: WriteToolResult, entry: LedgerEntry, args: Record<string, unknown>): Promise<boolean> {
    if (entry.keyKind !== 'operation_id' || result.outcome !== 'rejected' || result.error?.code !== ErrorCode.UNKNOWN_OPERATION_ID)
      return false;
    if (this.renewedKeys.has(entry.key)) return false;
    const issued = await this.issueOperationId(entry.tool);
    if ('failure' in issued) return false;
    this.renewedKeys.add(issued.operationId);
    this.ledger.update(entry, { key: issued.operationId });
    args.operation_id = issued.operationId;
    await this.ledger.persist();
    return true;
  }

  /**
   * The tools that take a server-issued operation id: as given, or as the server lists them (a tool whose input
   * schema requires `operation_id`), asked once and kept for this client's life.
   */
  private async operationIdToolNames(): Promise<
    { names: ReadonlySet<string>; attempts: number } | { failure: TransportFailure; attempts: number }
  > {
    if (this.operationIdTools) return { names: this.operationIdTools, attempts: 0 };
    let names: Set<string> | undefined;
    let failure: TransportFailure | undefined;
    const attempts = await this.retrying(async () => {
      let client: Client;
      try {
        client = await this.connection();
      } catch (err) {
        failure = classifyCallError(err);
        return { done: failure.kind !== 'transport', retryAfterMs: failure.retryAfterMs };
      }
      try {
        const found = new Set<string>();
        let cursor: string | undefined;
        do {
          const page = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: this.requestTimeoutMs });
          for (const listed of page.tools) if (takesOperationId(listed.inputSchema)) found.add(listed.name);
          cursor = page.nextCursor;
        } while (cursor !== undefined);
        names = found;
        return { done: true };
      } catch (err) {
        failure = classifyCallError(err);
        if (failure.connectionClosed) this.dropConnection(client);
        return { done: failure.kind !== 'transport', retryAfterMs: failure.retryAfterMs };
      }
    });
    if (!names) return { failure: failure ?? { kind: 'transport', message: 'the server did not list its tools' }, attempts };
    this.operationIdTools = names;
    return { names, attempts };
  }

  /** Asks the server for an operation id for `tool`; an id obtained but never used is harmless. */
  private async issueOperationId(
    tool: string,
  ): Promise<{ operationId: string; attempts: number } | { failure: TransportFailure; attempts: number }> {
    const read = await this.callRead('issue_operation_id', { tool });
    const content = read.structuredContent;
    const nested = content?.result && typeof content.result === 'object' ? (content.result as Record<string, unknown>) : undefined;
    const operationId = content?.operation_id ?? nested?.operation_id;
    if (!read.isError && typeof operationId === 'string') return { operationId, attempts: read.attempts };
    return {
      failure: read.failure ?? {
        kind: 'deterministic',
        message: `issue_operation_id failed: ${read.text.slice(0, 120) || 'no operation_id in its answer'}`,
      },
      attempts: read.attempts,
    };
  }

  /**
   * Runs attempts until one is final, the attempt count is spent, or the next wait would cross the time budget.
   * `afterEach` runs after every attempt with the wait that follows it (undefined: it was the last), before the wait.
   */
  private async retrying(
    attempt: () => Promise<{ done: boolean; retryAfterMs?: number | undefined }>,
    afterEach?: (count: number, nextDelayMs: number | undefined) => Promise<unknown>,
  ): Promise<number> {
    const started = this.clock();
    for (let count = 1; ; count++) {
      const { done, retryAfterMs } = await attempt();
      let delay: number | undefined;
      if (!done && count < this.retry.maxAttempts) {
        const next = backoffDelay(count - 1, this.retry, this.random, retryAfterMs);
        if (this.clock() - started + next <= this.retry.maxElapsedMs) delay = next;
      }
      await afterEach?.(count, delay);
      if (delay === undefined) return count;
      await this.sleep(delay);
    }
  }

  private async attemptToolCall(tool: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<Attempt> {
    let client: Client;
    try {
      client = await this.connection();
    } catch (err) {
      return { failure: classifyCallError(err), sent: false };
    }
    try {
      for (;;) {
        const answer = await client.callTool(
          { name: tool, arguments: args, ...(meta ? { _meta: meta } : {}) },
          { timeout: this.requestTimeoutMs },
        );
        // A 2025-11-25 connection gets the approval link as a tool result: after the wait (the same rounds as a
        // 2026-07-28 input request), the same call is sent again: it runs, is declined, or names a new link.
        const link = approvalLinkOf(answer);
        if (!link) return { answer, sent: true };
        await this.awaitApproval(link);
      }
    } catch (err) {
      const gaveUp = this.approvalWaits.getStore()?.gaveUp;
      // Nothing ran: the server runs an approval tool only after the person approved.
      if (gaveUp) return { failure: { kind: 'deterministic', message: gaveUp }, sent: true };
      const failure = classifyCallError(err);
      // A closed transport cannot carry the next attempt; other failures leave the stateless connection usable.
      if (failure.connectionClosed) this.dropConnection(client);
      return { failure, sent: true };
    }
  }

  private connection(): Promise<Client> {
    if (!this.connecting) {
      const connecting = (async () => {
        // 'auto': MCP 2026-07-28 where the server speaks it (server/discover), the 2025 handshake otherwise; 'legacy': that handshake.
        const confirm = this.confirm;
        // URL mode always: an approval tool's link is shown to the person, who decides on the server's own page.
        const client = new Client(this.clientInfo, {
          capabilities: { elicitation: { ...(confirm ? { form: {} } : {}), url: {} } },
          versionNegotiation: { mode: this.protocolEra },
          // Each round of an approval wait is one poll; the wait itself is bounded by approvalWaitMs (two links at most).
          inputRequired: { maxRounds: 2 * Math.ceil(this.approvalWaitMs / Math.max(1, this.approvalPollMs)) + 10 },
        });
        client.setRequestHandler('elicitation/create', async (request) => {
          const params = request.params as { mode?: string; message: string; url?: string; elicitationId?: string };
          if (params.mode === 'url' && typeof params.url === 'string') return this.awaitApproval({ ...params, url: params.url });
          if (!confirm) return { action: 'decline' };
          return (await confirm({ message: params.message })) ? { action: 'accept', content: { confirm: true } } : { action: 'decline' };
        });
        const transport = new StreamableHTTPClientTransport(this.url, { requestInit: this.requestInit, fetch: this.fetchSeam });
        await client.connect(transport, { timeout: this.requestTimeoutMs });
        return client;
      })();
      this.connecting = connecting;
      // A failed connect is forgotten so the next attempt opens a fresh one.
      connecting.catch(() => {
        if (this.connecting === connecting) this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  /**
   * One round of an approval wait (URL-mode elicitation): a new link is shown (and opened when asked), a known one
   * is waited on; then the same call is retried with the same key (2026-07-28: by the SDK, with its requestState;
   * 2025-11-25: by attemptToolCall after the APPROVAL_REQUIRED result). The server runs the
   * tool only once the person approved, answers `rejected` once they declined, and a new link once one expired;
   * the wait gives up after approvalWaitMs on a link, or when a second expired link would follow.
   */
  private async awaitApproval(params: { url: string; message: string; elicitationId?: string }): Promise<{ action: 'accept' }> {
    const wait = this.approvalWaits.getStore() ?? { tool: 'unknown', links: [], shownAt: this.clock() };
    if (!wait.links.includes(params.url)) {
      if (wait.links.length >= 2) {
        wait.gaveUp = `not approved: the approval link expired twice (last ${wait.links.at(-1)}); nothing ran, the key is free. Call again when the person is ready`;
        throw new ApprovalNotGivenError(wait.gaveUp);
      }
      const renewed = wait.links.length > 0;
      wait.links.push(params.url);
      wait.shownAt = this.clock();
      await this.showApprovalLink({
        tool: wait.tool,
        url: params.url,
        message: params.message,
        ...(params.elicitationId !== undefined ? { elicitationId: params.elicitationId } : {}),
        renewed,
      });
      if (this.openApprovalLinks) openInBrowser(params.url);
    } else if (this.clock() - wait.shownAt >= this.approvalWaitMs) {
      wait.gaveUp = `not approved: no decision at ${params.url} within ${Math.round(this.approvalWaitMs / 1000)} s; nothing ran. Call again with the same key to keep waiting`;
      throw new ApprovalNotGivenError(wait.gaveUp);
    }
    await this.sleep(this.approvalPollMs);
    // The answer is not the decision: the server reads the person's decision from its approval record.
    return { action: 'accept' };
  }

  private dropConnection(client: Client): void {
    const connecting = this.connecting;
    this.connecting = undefined;
    void connecting?.then((current) => (current === client ? client.close() : undefined)).catch(() => undefined);
  }

  private async exclusive<T>(lockId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.intentLocks.get(lockId) ?? Promise.resolve();
    const run = previous.then(work, work);
    const tail = run.catch(() => undefined);
    this.intentLocks.set(lockId, tail);
    try {
      return await run;
    } finally {
      if (this.intentLocks.get(lockId) === tail) this.intentLocks.delete(lockId);
    }
  }
}
