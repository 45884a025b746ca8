import { createHash } from 'node:crypto';
import type { Tool } from '@modelcontextprotocol/client';
import type { RecordIdentity, RecordMemos } from 'idempotent-mcp/engine';

/**
 * The upstream's `tools/list` as a cold start last read it, kept in the endpoint's table, so that the next cold
 * starts (the MCP function's and the reconciler's, every scale-out) build the gateway's tools without reaching the
 * upstream or reading the credentials secret. Safe to keep because the listing decides only what the gateway lists
 * and validates, never whether a write is sent: a schema that changed since is refused by the upstream (nothing runs)
 * or by the gateway (nothing is sent), and the fingerprint is computed from the call's arguments alone. It is kept
 * per policy and upstream (a new deployment of either reads again). Fresh for `maxAgeMs`: a warm container keeps the
 * list it read for its whole life anyway, so the memo bounds staleness no worse than that. After it, a cold start
 * reads the upstream again; only when that read fails (the upstream or the credential cannot be had) does it serve
 * the stale listing, for at most a day more, so replays and status are still answered and a write's answer names
 * the cause.
 */
export interface ListingMemo {
  /** The listing kept for this policy and upstream: fresh within the memo's age, else stale (a day at most), else none. */
  get(): Promise<KeptListing | undefined>;
  put(tools: readonly Tool[]): Promise<void>;
}

/** A kept listing; `fresh`: within the memo's age (used without reading the upstream). */
export interface KeptListing {
  tools: Tool[];
  fresh: boolean;
}

/** The memo's place: a record partition no call can have (`tools/list` is not a tool name MCP allows). */
const MEMO = 'gateway-listing';
const TOOL = 'tools/list';
const TENANT = 'gateway';

/** How long a kept listing serves cold starts; after it, a cold start reads the upstream again. */
const LISTING_MEMO_MAX_AGE_MS = 60 * 60_000;
/** How much longer a kept listing serves a cold start that could not read the upstream's (and the table's TTL). */
const STALE_LISTING_MS = 86_400_000;

/** The listing memo on the store's record memos (the DynamoDB table when deployed). */
export class RecordListingMemo implements ListingMemo {
  private readonly identity: RecordIdentity;

  constructor(
    private readonly memos: RecordMemos,
    /** What the listing was read for: the upstream's URL and the policy; another of either is another memo. */
    scope: { upstream: string; policy: unknown },
    /** `readOnly`: a kept listing is read, none is written (a function whose role may not put items: the reconciler). */
    private readonly options: { maxAgeMs?: number; now?: () => number; readOnly?: boolean } = {},
  ) {
    const digest = createHash('sha256')
      .update(JSON.stringify([scope.upstream, scope.policy]))
      .digest('hex');
    this.identity = { tenant: TENANT, tool: TOOL, idempotencyKey: digest };
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private get maxAgeMs(): number {
    return this.options.maxAgeMs ?? LISTING_MEMO_MAX_AGE_MS;
  }

  async get(): Promise<KeptListing | undefined> {
    const kept = (await this.memos.get(this.identity, MEMO)) as { listedAtMs?: number; tools?: Tool[] } | null | undefined;
    if (!kept || !Array.isArray(kept.tools) || typeof kept.listedAtMs !== 'number') return undefined;
    const age = this.now() - kept.listedAtMs;
    // A listing from the future (a clock gone back) is not trusted as fresh; DynamoDB's TTL deletes late, so the
    // stale bound is checked here too.
    if (age < 0 || age >= this.maxAgeMs + STALE_LISTING_MS) return undefined;
    return { tools: kept.tools, fresh: age < this.maxAgeMs };
  }

  async put(tools: readonly Tool[]): Promise<void> {
    if (this.options.readOnly) return;
    const listedAtMs = this.now();
    // The item goes with the table's TTL once it may no longer serve even stale.
    const expiresAtSeconds = Math.floor((listedAtMs + this.maxAgeMs + STALE_LISTING_MS) / 1000);
    await this.memos.put(this.identity, MEMO, { listedAtMs, tools }, expiresAtSeconds);
  }
}
