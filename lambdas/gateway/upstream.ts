import {
  AuthorizationServerMismatchError,
  type CallToolResult,
  Client,
  ClientCredentialsProvider,
  InsecureTokenEndpointError,
  IssuerMismatchError,
  OAuthError,
  OAuthErrorCode,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  StreamableHTTPClientTransport,
  type Tool,
  type Transport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { AsyncLocalStorage } from 'node:async_hooks';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { withRequestSignals } from '../core/request-signals';
import { credentialId, type UpstreamCredential } from './credentials';

/** The one upstream MCP server: a streamable-HTTP URL, or (locally) a command the gateway starts and speaks stdio with. */
export type UpstreamTarget =
  | { url: string }
  | {
      command: string;
      args?: readonly string[];
      /** Added to the process's environment (besides the credential's `env`). */
      env?: Readonly<Record<string, string>>;
      cwd?: string;
    };

/**
 * Whether a failed call may have reached the upstream. `not_sent`: it certainly did not (no connection, refused at
 * the door): the key is released. `credential_refused`: it did not either, because the upstream or its authorization
 * server refused the gateway's credential, which calling again does not change. `refused`: the upstream answered with
 * a protocol error, so its tool did not run. `uncertain`: it may have run (sent, then no answer): the outcome is
 * reconciled, never guessed.
 */
export type UpstreamFailure = 'not_sent' | 'credential_refused' | 'refused' | 'uncertain';

export class UpstreamError extends Error {
  override name = 'UpstreamError';
  constructor(
    readonly failure: UpstreamFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** What the gateway's tools and its reconciler ask of the upstream. */
export interface UpstreamCaller {
  listTools(credential: UpstreamCredential): Promise<Tool[]>;
  callTool(
    credential: UpstreamCredential,
    name: string,
    args: Record<string, unknown>,
    options: {
      signal?: AbortSignal;
      /** Bounds every step before the request leaves (credentials, discovery, connect): aborted first, the call is not sent. Default: `signal`. */
      presendSignal?: AbortSignal;
      timeoutMs: number;
    },
  ): Promise<CallToolResult>;
  /** Closes every connection (and stops the processes it started). */
  close(): Promise<void>;
}

const CONNECT_TIMEOUT_MS = 15_000;
const CLIENT_INFO = { name: 'idempotent-mcp-gateway', version: '0.1.0' };

function describe(err: unknown): string {
  const error = err as Error & { cause?: { code?: string } };
  return `${error?.name ?? 'Error'}: ${error?.message ?? String(err)}`.slice(0, 300);
}

/** A failed `fetch` that never reached a server (refused, no route, no such host): nothing was sent. */
function neverConnected(err: unknown): boolean {
  for (
    let cause = err as { code?: unknown; cause?: unknown } | undefined, depth = 0;
    cause && depth < 5;
    cause = cause.cause as typeof cause, depth++
  )
    if (['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(String(cause.code))) return true;
  return false;
}

/** OAuth errors that pass (the server failing or busy): a later attempt with the same credential may get a token. */
const PASSING_OAUTH_ERRORS: ReadonlySet<string> = new Set([
  OAuthErrorCode.ServerError,
  OAuthErrorCode.TemporarilyUnavailable,
  OAuthErrorCode.TooManyRequests,
]);

/**
 * Why the gateway's credential was refused, when that is what failed: the authorization server refused the client
 * credentials (`invalid_client`, `invalid_scope`...), or the upstream answered 401/403 to the credential it was sent.
 * Undefined for any other failure. Names the cause, never the credential.
 */
function credentialRefusal(err: unknown): string | undefined {
  if (err instanceof OAuthError && !PASSING_OAUTH_ERRORS.has(err.code))
    return `the authorization server answered ${err.code}${err.message ? ` (${err.message.slice(0, 200)})` : ''}`;
  // The upstream's authorization server is not the one the credential is registered with, or not served over https:
  // the credential is never sent there, and calling again will not change that.
  if (err instanceof AuthorizationServerMismatchError)
    return `the upstream's authorization server ${err.currentIssuer} is not the issuer ${err.recordedIssuer} the credential is registered with`;
  if (err instanceof IssuerMismatchError)
    return `the authorization server's metadata names issuer ${err.received ?? 'none'}, not ${err.expected ?? 'the one expected'}`;
  if (err instanceof InsecureTokenEndpointError) return `the authorization server's token endpoint ${err.tokenEndpoint} is not https`;
  if (err instanceof UnauthorizedError)
    return `the upstream answered 401 Unauthorized${err.message ? ` (${err.message.slice(0, 200)})` : ''}`;
  if (err instanceof SdkHttpError && (err.status === 401 || err.status === 403)) return `the upstream answered HTTP ${err.status}`;
  return undefined;
}

/** How a failure of `tools/call` counts (see UpstreamFailure). */
function classifyCallFailure(err: unknown): UpstreamFailure {
  if (credentialRefusal(err) !== undefined) return 'credential_refused';
  // A JSON-RPC error answer: the upstream refused the request (unknown tool, invalid arguments); an internal error
  // may come from a tool that failed half-way.
  if (err instanceof ProtocolError) return err.code === ProtocolErrorCode.InternalError ? 'uncertain' : 'refused';
  if (err instanceof SdkHttpError) {
    // Refused at the door (authentication, a bad request): nothing ran. 5xx may follow a partial run.
    return err.status >= 400 && err.status < 500 && err.status !== 408 ? 'not_sent' : 'uncertain';
  }
  if (err instanceof SdkError && err.code === SdkErrorCode.NotConnected) return 'not_sent';
  if (neverConnected(err)) return 'not_sent';
  return 'uncertain';
}

/** Consecutive failures to connect with one credential: how long calls are answered from the failure, not a new attempt. */
const CREDENTIAL_REFUSED_BACKOFF_MS = 60_000;
const UNREACHABLE_BACKOFF_MS = { baseMs: 1_000, maxMs: 30_000 };
/** Connections (and their OAuth tokens) kept at once, one per credential: the least recently used is closed past it. */
const MAX_CONNECTIONS = 64;

/**
 * What one call has done so far, seen by the fetch every request of the call goes through (AsyncLocalStorage: the
 * SDK's transport sends in the call's async context). `sent` turns true when a request carrying the `tools/call`
 * leaves, and back to false when the upstream refuses it at the door (401/403, or 404 for a session it no longer
 * knows): so a failure while `sent` is false proves the call never reached the tool. `presend` bounds every step
 * before the send (token, discovery, connect); once the call is given up, nothing of it is sent any more.
 */
interface CallTrace {
  sent: boolean;
  givenUp: boolean;
  presend?: AbortSignal;
}
const callTraces = new AsyncLocalStorage<CallTrace>();

function carriesToolsCall(body: unknown): boolean {
  if (typeof body !== 'string' || !body.includes('tools/call')) return false;
  try {
    return [JSON.parse(body)].flat().some((message: { method?: unknown }) => message?.method === 'tools/call');
  } catch {
    return false;
  }
}

const hasSession = (init: RequestInit | undefined) => new Headers(init?.headers).has('mcp-session-id');

/** Rejects with `onAbort()` when the signal fires first (the pending work goes on for whoever shares it). */
function untilAborted<T>(pending: Promise<T>, signal: AbortSignal | undefined, onAbort: () => Error): Promise<T> {
  if (!signal) return pending;
  if (signal.aborted) return Promise.reject(onAbort());
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(onAbort());
    signal.addEventListener('abort', abort, { once: true });
    pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

interface Connection {
  client: Client;
  /** The upstream answered 404 to this connection's session id: it no longer knows the session (it restarted). */
  lost: boolean;
}

/**
 * The upstream over the MCP client (v2 SDK, which speaks both protocol eras): one connection per credential, made on
 * first use and made again after it closes (a stdio process that died) or after the upstream answers 404 to its
 * session (an HTTP upstream restarted: the spec's client MUST start a new session). A stdio target is one process per
 * credential, with that credential's environment. A failed connection is remembered for a while (credential refused:
 * a minute; unreachable: from a second, doubling): calls meanwhile get that answer without a new discovery.
 */
export function connectUpstream(
  target: UpstreamTarget,
  options: {
    stderr?: 'inherit' | 'ignore';
    /** Wraps each connection's transport (`idempotent-mcp check` loses or delays answers there). */
    wrapTransport?: (transport: Transport) => Transport;
  } = {},
): UpstreamCaller {
  const wrap = options.wrapTransport ?? ((transport: Transport) => transport);
  const connections = new Map<string, Promise<Connection>>();
  const failures = new Map<string, { until: number; streak: number; error: UpstreamError }>();
  // OAuth providers keep their tokens: kept per credential, so a new session does not fetch a new token.
  const providers = new Map<string, ClientCredentialsProvider>();
  let closed = false;

  function providerFor(id: string, oauth: Extract<UpstreamCredential, { oauthClientCredentials: unknown }>['oauthClientCredentials']) {
    let provider = providers.get(id);
    if (!provider) {
      provider = new ClientCredentialsProvider({
        clientId: oauth.clientId,
        clientSecret: oauth.clientSecret,
        scope: oauth.scope,
        expectedIssuer: oauth.issuer,
      });
      providers.set(id, provider);
      for (const oldest of providers.keys()) if (providers.size > MAX_CONNECTIONS) providers.delete(oldest);
    }
    return provider;
  }

  async function connect(id: string, credential: UpstreamCredential): Promise<Connection> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const connection: Connection = { client, lost: false };
    if ('url' in target) {
      const headers: Record<string, string> = {};
      if ('header' in credential) headers[credential.header.name] = credential.header.value;
      const traced: typeof fetch = async (url, init) => {
        const trace = callTraces.getStore();
        if (trace?.givenUp) throw new UpstreamError('not_sent', 'the call was given up before it was sent');
        const call = trace !== undefined && init?.method === 'POST' && carriesToolsCall(init.body);
        if (trace && !call && trace.presend)
          init = { ...init, signal: init?.signal ? AbortSignal.any([init.signal, trace.presend]) : trace.presend };
        if (call) trace.sent = true;
        let response: Response;
        try {
          response = await fetch(url, init);
        } catch (err) {
          if (call && neverConnected(err)) trace.sent = false;
          throw err;
        }
        const unknownSession = response.status === 404 && hasSession(init);
        if (unknownSession) connection.lost = true;
        // Refused at the door: the upstream did not run it (the SDK may send it again with a new token).
        if (call && (response.status === 401 || response.status === 403 || unknownSession)) trace.sent = false;
        return response;
      };
      await client.connect(
        wrap(
          new StreamableHTTPClientTransport(new URL(target.url), {
            requestInit: { headers },
            // Kept across calls and tenants: each request gets its own abort signal, not one piling listeners up.
            fetch: withRequestSignals(traced),
            ...('oauthClientCredentials' in credential ? { authProvider: providerFor(id, credential.oauthClientCredentials) } : {}),
          }),
        ),
        { timeout: CONNECT_TIMEOUT_MS },
      );
    } else {
      await client.connect(
        wrap(
          new StdioClientTransport({
            command: target.command,
            args: [...(target.args ?? [])],
            env: { ...getDefaultEnvironment(), ...target.env, ...('env' in credential ? credential.env : {}) },
            cwd: target.cwd,
            stderr: options.stderr ?? 'inherit',
          }),
        ),
        { timeout: CONNECT_TIMEOUT_MS },
      );
    }
    return connection;
  }

  function forget(id: string, pending: Promise<Connection>) {
    if (connections.get(id) !== pending) return;
    connections.delete(id);
    void pending.then((connection) => connection.client.close()).catch(() => {});
  }

  function connectionFor(credential: UpstreamCredential): Promise<Connection> {
    if (closed) return Promise.reject(new UpstreamError('not_sent', 'the gateway is shutting down'));
    const id = credentialId(credential);
    const failed = failures.get(id);
    if (failed && failed.until > Date.now()) return Promise.reject(failed.error);
    const pending = connections.get(id);
    if (pending) {
      // Most recently used last: the first in the map is the one closed when there are too many.
      connections.delete(id);
      connections.set(id, pending);
      return pending;
    }
    // Outside any call's trace: the connection is shared by every call with this credential.
    const made: Promise<Connection> = callTraces
      .exit(() => connect(id, credential))
      .then(
        (connection) => {
          failures.delete(id);
          // A closed connection (the process died, the server went away) is made again on the next call.
          connection.client.onclose = () => {
            if (connections.get(id) === made) connections.delete(id);
          };
          return connection;
        },
        (err: unknown) => {
          if (connections.get(id) === made) connections.delete(id);
          const refusal = credentialRefusal(err);
          const error =
            refusal !== undefined
              ? new UpstreamError('credential_refused', `the gateway's upstream credential was refused: ${refusal}`, { cause: err })
              : new UpstreamError('not_sent', `the upstream could not be reached: ${describe(err)}`, { cause: err });
          const streak = (failures.get(id)?.streak ?? 0) + 1;
          const backoff =
            refusal !== undefined
              ? CREDENTIAL_REFUSED_BACKOFF_MS
              : Math.min(UNREACHABLE_BACKOFF_MS.maxMs, UNREACHABLE_BACKOFF_MS.baseMs * 2 ** (streak - 1));
          failures.set(id, { until: Date.now() + backoff, streak, error });
          throw error;
        },
      );
    connections.set(id, made);
    for (const [oldest, connection] of connections) if (connections.size > MAX_CONNECTIONS) forget(oldest, connection);
    return made;
  }

  /** Runs `use` on the credential's connection; once more on a new session when the upstream forgot the old one. */
  async function withConnection<T>(
    credential: UpstreamCredential,
    presend: AbortSignal | undefined,
    trace: CallTrace,
    use: (client: Client) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const pending = connectionFor(credential);
      const connection = await untilAborted(
        pending,
        presend,
        () => new UpstreamError('not_sent', "the call's time ran out before the upstream was connected"),
      );
      if (presend?.aborted) throw new UpstreamError('not_sent', "the call's time ran out before the upstream was connected");
      if (connection.lost && attempt === 0) {
        // A request of its own (the event stream) already found the session gone.
        forget(credentialId(credential), pending);
        continue;
      }
      try {
        return await callTraces.run(trace, () => use(connection.client));
      } catch (err) {
        if (!connection.lost) throw err;
        forget(credentialId(credential), pending);
        // The upstream answered 404 to the session: it did not run the request; a new session may (once).
        if (trace.sent || attempt > 0) throw err;
      }
    }
  }

  return {
    async listTools(credential) {
      const trace: CallTrace = { sent: false, givenUp: false };
      return withConnection(credential, undefined, trace, async (client) => {
        const tools: Tool[] = [];
        let cursor: string | undefined;
        do {
          const page = await client.listTools(cursor === undefined ? undefined : { cursor });
          tools.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor !== undefined);
        return tools;
      });
    },
    async callTool(credential, name, args, { signal, presendSignal, timeoutMs }) {
      const presend = presendSignal ?? signal;
      const trace: CallTrace = { sent: false, givenUp: false, presend };
      const notSent = () =>
        new UpstreamError('not_sent', `the upstream's ${name} was not called: the call's time ran out before it was sent`);
      try {
        return await withConnection(credential, presend, trace, (client) => {
          // Over stdio the request is written as soon as it is made.
          if (!('url' in target)) trace.sent = true;
          const call = client.callTool({ name, arguments: args }, { signal, timeout: timeoutMs }) as Promise<CallToolResult>;
          if (!presend) return call;
          // Until the request leaves (a token, a discovery), the call's time before the send bounds it; once it left,
          // only its own timeout does.
          return new Promise<CallToolResult>((resolve, reject) => {
            const abort = () => {
              if (trace.sent) return;
              trace.givenUp = true;
              reject(notSent());
            };
            if (presend.aborted) abort();
            presend.addEventListener('abort', abort, { once: true });
            call.then(resolve, reject).finally(() => presend.removeEventListener('abort', abort));
          });
        });
      } catch (err) {
        trace.givenUp = true;
        if (err instanceof UpstreamError && (err.failure !== 'uncertain' || trace.sent)) throw err;
        const refusal = credentialRefusal(err);
        if (refusal !== undefined)
          throw new UpstreamError('credential_refused', `the gateway's upstream credential was refused: ${refusal}`, { cause: err });
        // The tools/call never left (or was refused at the door): nothing ran, whatever the error says.
        if (!trace.sent) throw new UpstreamError('not_sent', `the upstream's ${name} was not called: ${describe(err)}`, { cause: err });
        const failure = classifyCallFailure(err);
        throw new UpstreamError(
          failure,
          `the upstream's ${name} ${failure === 'refused' ? 'refused the call' : 'did not answer'}: ${describe(err)}`,
          { cause: err },
        );
      } finally {
        trace.givenUp = true;
      }
    },
    async close() {
      closed = true;
      const pending = [...connections.values()];
      connections.clear();
      await Promise.allSettled(pending.map(async (connection) => (await connection).client.close()));
    },
  };
}
