import { randomUUID } from 'node:crypto';
import type { ApprovalStore } from '../confirmation/approval-store';
import { DynamoDbApprovalStore } from '../store/dynamodb-approval-store';
import type { AppConfig } from '../config';
import { createTokenVerifier, type TokenVerifier } from '../auth/verifier';
import { createSigners, type OperationIdSigner } from '../engine/signers';
import type { ConfirmationSigner } from '../confirmation/signer';
import { IdempotencyEngine, type EngineOptions } from '../engine/engine';
import type { IdempotencyObserver } from '../engine/observer';
import { createEngineObserver } from '../observability/metrics';
import { lazySecret } from './operation-id-secret';
import { createWorkerServices, type WorkerServiceOverrides, type WorkerServices } from './worker-services';

/**
 * The long-lived dependencies of the MCP function, built once per container (Lambda) or process (local stack) and
 * shared by every request: clients keep their connections and the JWKS cache survives between invocations. The
 * workers' services plus what serving a request takes: the engine, the signers and the token verifier. A tool's
 * own clients (the reference endpoint's payments provider, a team's systems) are the endpoint's, added next to these.
 */
export interface Services extends WorkerServices {
  config: AppConfig & { approvalBaseUrl?: string };
  engine: IdempotencyEngine;
  operationIds: OperationIdSigner;
  confirmations: ConfirmationSigner;
  auth: TokenVerifier;
  /** The HMAC key of operation ids, confirmations and the approval page's cookies (domain-separated), read when first needed. */
  signingSecret: () => Promise<string>;
  /** The people's decisions on approvals and form confirmations (lambdas/confirmation/core/approval.ts). */
  approvals: ApprovalStore;
  observer: IdempotencyObserver;
  /** Ids of new outbox events (random). */
  newEventId: () => string;
}

/**
 * What `createServices` takes instead of what it builds from the config (a store, a clock, a logger, ...).
 */
export interface ServiceOverrides extends WorkerServiceOverrides {
  observer?: IdempotencyObserver;
  /** Engine tuning (tests shorten the in-progress wait, for instance). */
  engine?: Omit<EngineOptions, 'store' | 'clock' | 'observer' | 'confirmation'>;
  /** Tests pin event ids (to make a transaction collide, for instance). */
  newEventId?: () => string;
}

/**
 * The MCP function's services, built once per container from its config: store, engine, signers, logger, ...
 */
export function createServices(config: AppConfig, overrides: ServiceOverrides = {}): Services {
  const base = createWorkerServices(config, overrides);
  const { store, clock, logger } = base;
  const observer = overrides.observer ?? createEngineObserver(logger);
  const secret = lazySecret(config.operationIdSecret);
  const signers = createSigners(secret, clock);
  const approvals = new DynamoDbApprovalStore({ client: base.doc, tableName: config.tableName, keyPrefix: config.tableKeyPrefix });
  // `unknown` answers suggest retrying after about one reconciler period.
  const engine = new IdempotencyEngine({
    unknownRetryAfterMs: config.sideEffects.reconcileIntervalMs,
    // The tools' in-flight windows default from it; the reconciler reads the same setting.
    downstreamTimeoutMs: config.sideEffects.downstreamTimeoutMs,
    ...overrides.engine,
    store,
    clock,
    observer,
    // The confirmation gate's ports, given once (the MCP edge chooses per request how the person is asked).
    confirmation: { approvals, confirmations: signers.confirmations, logger, approvalTtlSeconds: config.approvals.ttlSeconds },
  });
  return {
    ...base,
    config: { ...config, approvalBaseUrl: config.approvals.baseUrl },
    approvals,
    engine,
    ...signers,
    signingSecret: secret,
    auth: createTokenVerifier(config.auth),
    observer,
    newEventId: overrides.newEventId ?? (() => `evt_${randomUUID()}`),
  };
}
