import type { Clock } from '../core/clock';
import { systemClock } from '../core/clock';
import { IdempotencyEngine, type EngineOptions } from '../engine/engine';
import type { IdempotencyStore } from '../engine/persistence';
import { stderrLogger } from '../observability/logger';
import type { ApprovalStore } from '../confirmation/approval-store';
import { createSigners } from '../engine/signers';
import type { ToolRuntime } from './tool-types';

/**
 * What `defineWriteTool` tools need to run on a server of your own (spread your clients next to it). It needs the
 * store and the operation-id secret; optionally the clock, logger, engine settings, approval store and confirmation
 * settings.
 *
 * @public
 */
export function createToolRuntime(options: {
  /** Where records live: `new DynamoDbIdempotencyStore(...)` from idempotent-mcp/dynamodb, or an in-memory store. */
  store: IdempotencyStore;
  /** HMAC key of operation ids and confirmations (at least 32 characters), or how to read it. */
  secret: string | (() => Promise<string>);
  clock?: Clock;
  /** Where the tools log. Default JSON lines on standard error (standard output is a stdio MCP server's protocol channel). */
  logger?: ToolRuntime['logger'];
  /** Engine tuning; the store, the clock and the confirmation gate's ports are the runtime's. */
  engine?: Omit<EngineOptions, 'store' | 'clock' | 'confirmation'>;
  /** Tools whose confirmation 2025-era clients do on their side. Default none. */
  confirmationOptOut?: string[];
  /** Where the people's decisions are kept (each round answered once); needed by `confirmation: 'approval'` tools. */
  approvals?: ApprovalStore;
  /** The base URL of the approval page's links (the endpoint serving it). */
  publicBaseUrl?: string;
}): ToolRuntime {
  const clock = options.clock ?? systemClock;
  const { secret } = options;
  if (typeof secret === 'string' && secret.length < 32) throw new Error('the tool runtime secret must be at least 32 characters');
  const readSecret = typeof secret === 'string' ? () => Promise.resolve(secret) : secret;
  const logger = options.logger ?? stderrLogger();
  const signers = createSigners(readSecret, clock);
  // The gate's ports, once: the same approvals and round signer the runtime names (the MCP edge reads `approvals`).
  const confirmation = { approvals: options.approvals, confirmations: signers.confirmations, logger };
  return {
    engine: new IdempotencyEngine({ ...options.engine, store: options.store, clock, confirmation }),
    store: options.store,
    clock,
    logger,
    ...signers,
    config: { confirmationOptOut: options.confirmationOptOut ?? [], publicBaseUrl: options.publicBaseUrl },
    approvals: options.approvals,
  };
}
