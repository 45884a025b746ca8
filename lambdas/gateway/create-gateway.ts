import type { Tool } from '@modelcontextprotocol/client';
import type { RecordMemos } from 'idempotent-mcp/engine';
import type { ToolDefinition, ToolRuntime } from 'idempotent-mcp/mcp';
import { CredentialsError, type CredentialSource } from './credentials';
import type { ListingMemo } from './listing-memo';
import { RecordLookupMemo, type LookupMemo } from './lookup-memo';
import { checkGatewayPolicy, checkPolicyAgainstUpstream, GatewayPolicyError, type GatewayPolicy } from './policy';
import { gatewayTools } from './tools';
import { connectUpstream, type UpstreamCaller, type UpstreamTarget } from './upstream';

export interface GatewayOptions {
  /** The policy file's content (checked here), or a policy `parseGatewayPolicy` already checked. */
  policy: unknown;
  /** The upstream MCP server (a URL, or a command to start), or a caller of your own. */
  upstream: UpstreamTarget | UpstreamCaller;
  /** The gateway's own credentials for the upstream, by tenant (a file locally, Secrets Manager deployed). */
  credentials: CredentialSource;
  /** The endpoint's table (the records' own): each write's lookup is kept there beside its record. */
  table: { memos: RecordMemos } | { memo: LookupMemo };
  /**
   * Where the upstream's `tools/list` is kept between starts (the deployed functions: the table). A fresh kept listing
   * is used without reaching the upstream; else the upstream is read and its listing kept, and a stale kept listing
   * serves only when that read fails. Unset: read every start.
   */
  listing?: ListingMemo;
}

/**
 * A gateway: the upstream's tools as this toolkit's tools, ready for `createApp` (the HTTP endpoint), the reconciler
 * (`startReconciler`, or the reconciler function) and the Lambda handler, like any tools module.
 */
export interface Gateway<S extends ToolRuntime = ToolRuntime> {
  /** The tools served: every upstream tool the policy names, writes keyed and reads passed through. */
  readonly tools: readonly ToolDefinition<S>[];
  /** Upstream tools the policy does not name: neither listed nor callable (fail closed). */
  readonly hidden: readonly string[];
  readonly policy: GatewayPolicy;
  /** Closes the upstream connections (and stops a stdio upstream's processes). */
  close(): Promise<void>;
}

const isCaller = (upstream: GatewayOptions['upstream']): upstream is UpstreamCaller =>
  typeof (upstream as UpstreamCaller).callTool === 'function';

async function listUpstream(upstream: UpstreamCaller, credentials: CredentialSource): Promise<Tool[]> {
  const credential = await credentials.forListing();
  if (!credential) throw new CredentialsError('the credentials name no tenant: add "*" (or a tenant) to read the upstream\'s tools');
  return upstream.listTools(credential);
}

/** The upstream to connect to, with the policy's `env` for a stdio process. */
function targetOf(upstream: UpstreamTarget, policy: GatewayPolicy): UpstreamTarget {
  if (!policy.env || 'url' in upstream) return upstream;
  return { ...upstream, env: { ...Object.fromEntries(policy.env), ...upstream.env } };
}

/**
 * The policy file's own mistakes, no upstream read (a start reports them before anything else it needs): its
 * content, and an `env` with no process to go to.
 */
export function checkPolicyFile(input: unknown, upstream: GatewayOptions['upstream']): { policy: GatewayPolicy; mistakes: string[] } {
  const { policy, mistakes } = checkGatewayPolicy(input);
  if (policy.env && !isCaller(upstream) && 'url' in upstream)
    mistakes.push(
      'the file: env is for a stdio upstream (a command the gateway starts); an HTTP upstream keeps its own environment: remove env',
    );
  return { policy, mistakes };
}

/**
 * Connects to the upstream, reads its `tools/list` with the listing credential, checks the policy against it and
 * builds the tools. Throws GatewayPolicyError (every mistake, one sentence each: the file's own and those against
 * the upstream, at once) before serving anything.
 */
export async function createGateway<S extends ToolRuntime = ToolRuntime>(options: GatewayOptions): Promise<Gateway<S>> {
  const { policy, mistakes } = checkPolicyFile(options.policy, options.upstream);
  const upstream = isCaller(options.upstream) ? options.upstream : connectUpstream(targetOf(options.upstream, policy));
  try {
    // A kept listing that cannot be read is as good as none: the upstream is asked.
    const kept = await options.listing?.get().catch(() => undefined);
    let listed: Tool[];
    let read = false;
    if (kept?.fresh) listed = kept.tools;
    else {
      try {
        listed = await listUpstream(upstream, options.credentials);
        read = true;
      } catch (err) {
        // The file's own mistakes are what to fix first; the upstream is checked again at the next start.
        if (mistakes.length > 0) throw new GatewayPolicyError(mistakes);
        // The upstream or its credential cannot be had now: a stale kept listing serves this container (replays and
        // status answered, each write told why it was not sent); the next cold start reads again.
        if (!kept) throw err;
        listed = kept.tools;
      }
    }
    mistakes.push(
      ...checkPolicyAgainstUpstream(
        policy,
        listed.map((tool) => ({
          name: tool.name,
          inputSchema: tool.inputSchema as { properties?: Record<string, unknown>; required?: string[] },
        })),
      ),
    );
    if (mistakes.length > 0) throw new GatewayPolicyError(mistakes);
    // Kept only once it fits the policy; failing to keep it costs the next cold start a read, nothing more.
    if (read) await options.listing?.put(listed).catch(() => {});
    const memo = 'memo' in options.table ? options.table.memo : new RecordLookupMemo(options.table.memos);
    const { tools, hidden } = gatewayTools<S>(policy, listed, { upstream, credentials: options.credentials, memo });
    return { tools, hidden, policy, close: () => upstream.close() };
  } catch (err) {
    await upstream.close();
    throw err;
  }
}
