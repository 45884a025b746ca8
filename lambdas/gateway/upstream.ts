import {
  type CallToolResult,
  Client,
  ClientCredentialsProvider,
  OAuthError,
  OAuthErrorCode,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  StreamableHTTPClientTransport,
  type Tool,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
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
    options: { signal?: AbortSignal; timeoutMs: number },
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
  for (let cause = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; cause && depth < 5; cause = cause.cause as typeof cause, depth++)
    if (['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(String(cause.code))) return true;
  return false;
}

/** OAuth errors that pass (the server failing or busy): a later attempt with the same credential may get a token. */
const PASSING_OAUTH_ERRORS: ReadonlySet<string> = new Set([OAuthErrorCode.ServerError, OAuthErrorCode.TemporarilyUnavailable, OAuthErrorCode.TooManyRequests]);

/**
 * Why the gateway's credential was refused, when that is what failed: the authorization server refused the client
 * credentials (`invalid_client`, `invalid_scope`...), or the upstream answered 401/403 to the credential it was sent.
 * Undefined for any other failure. Names the cause, never the credential.
 */
function credentialRefusal(err: unknown): string | undefined {
  if (err instanceof OAuthError && !PASSING_OAUTH_ERRORS.has(err.code)) return `the authorization server answered ${err.code}${err.message ? ` (${err.message.slice(0, 200)})` : ''}`;
  if (err instanceof UnauthorizedError) return `the upstream answered 401 Unauthorized${err.message ? ` (${err.message.slice(0, 200)})` : ''}`;
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

/**
 * The upstream over the MCP client (v2 SDK, which speaks both protocol eras): one connection per credential, made on
 * first use and made again after it closes (an HTTP upstream restarted, a stdio process that died). A stdio target
 * is one process per credential, with that credential's environment.
 */
export function connectUpstream(target: UpstreamTarget, options: { stderr?: 'inherit' | 'ignore' } = {}): UpstreamCaller {
  const connections = new Map<string, Promise<Client>>();
  let closed = false;

  async function connect(credential: UpstreamCredential): Promise<Client> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    if ('url' in target) {
      const headers: Record<string, string> = {};
      if ('header' in credential) headers[credential.header.name] = credential.header.value;
      await client.connect(
        new StreamableHTTPClientTransport(new URL(target.url), {
          requestInit: { headers },
          ...('oauthClientCredentials' in credential
            ? {
                authProvider: new ClientCredentialsProvider({
                  clientId: credential.oauthClientCredentials.clientId,
                  clientSecret: credential.oauthClientCredentials.clientSecret,
                  scope: credential.oauthClientCredentials.scope,
                  expectedIssuer: credential.oauthClientCredentials.issuer,
                }),
              }
            : {}),
        }),
        { timeout: CONNECT_TIMEOUT_MS },
      );
    } else {
      await client.connect(
        new StdioClientTransport({
          command: target.command,
          args: [...(target.args ?? [])],
          env: { ...getDefaultEnvironment(), ...target.env, ...('env' in credential ? credential.env : {}) },
          cwd: target.cwd,
          stderr: options.stderr ?? 'inherit',
        }),
        { timeout: CONNECT_TIMEOUT_MS },
      );
    }
    return client;
  }

  function clientFor(credential: UpstreamCredential): Promise<Client> {
    if (closed) return Promise.reject(new UpstreamError('not_sent', 'the gateway is shutting down'));
    const id = credentialId(credential);
    let pending = connections.get(id);
    if (!pending) {
      pending = connect(credential).then(
        (client) => {
          // A closed connection (the process died, the server went away) is made again on the next call.
          client.onclose = () => {
            if (connections.get(id) === pending) connections.delete(id);
          };
          return client;
        },
        (err: unknown) => {
          connections.delete(id);
          const refusal = credentialRefusal(err);
          if (refusal !== undefined) throw new UpstreamError('credential_refused', `the gateway's upstream credential was refused: ${refusal}`, { cause: err });
          throw new UpstreamError('not_sent', `the upstream could not be reached: ${describe(err)}`, { cause: err });
        },
      );
      connections.set(id, pending);
    }
    return pending;
  }

  return {
    async listTools(credential) {
      const client = await clientFor(credential);
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor === undefined ? undefined : { cursor });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return tools;
    },
    async callTool(credential, name, args, { signal, timeoutMs }) {
      const client = await clientFor(credential);
      // The connection took the call's whole budget: nothing was sent.
      if (signal?.aborted) throw new UpstreamError('not_sent', `the upstream's ${name} was not called: the call's time ran out while connecting`);
      try {
        return (await client.callTool({ name, arguments: args }, { signal, timeout: timeoutMs })) as CallToolResult;
      } catch (err) {
        const failure = classifyCallFailure(err);
        if (failure === 'credential_refused') throw new UpstreamError(failure, `the gateway's upstream credential was refused: ${credentialRefusal(err)}`, { cause: err });
        throw new UpstreamError(failure, `the upstream's ${name} ${failure === 'refused' ? 'refused the call' : 'did not answer'}: ${describe(err)}`, { cause: err });
      }
    },
    async close() {
      closed = true;
      const pending = [...connections.values()];
      connections.clear();
      await Promise.allSettled(pending.map(async (client) => (await client).close()));
    },
  };
}
