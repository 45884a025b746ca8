import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { AppConfig } from '../config';
import { createTokenVerifier, type TokenVerifier } from '../auth/verifier';
import { systemClock, type Clock } from '../core/clock';
import type { IssuedOperationId, OperationIdBinding, OperationIdCheck } from '../core/operation-id';
import type { ConfirmationBinding, ConfirmationStateCheck } from '../core/confirmation-state';
import { createSigners } from '../mcp/tool-runtime';
import { IdempotencyEngine, type EngineOptions } from '../engine/engine';
import type { IdempotencyObserver } from '../engine/observer';
import { logger as defaultLogger } from '../observability/logger';
import { createEngineObserver } from '../observability/metrics';
import { createDocumentClient } from '../store/clients';
import type { DocumentClient } from '../store/document-client';
import { DynamoDbIdempotencyStore } from '../store/dynamodb-idempotency-store';
import { createDownstreams, type Downstreams } from '../downstream';
import { OutboxStore } from '../outbox/outbox-store';
import { lazySecret } from './operation-id-secret';

/** Mints and checks operation ids; both reject with SecretUnavailableError while the key cannot be read. */
export interface OperationIdSigner {
  issue(binding: OperationIdBinding, ttlSeconds?: number): Promise<IssuedOperationId>;
  verify(binding: OperationIdBinding, value: unknown): Promise<OperationIdCheck>;
}

/** Signs and checks the `requestState` of confirmation rounds, with the operation-id key (domain-separated). */
export interface ConfirmationSigner {
  mint(binding: ConfirmationBinding): Promise<string>;
  verify(binding: ConfirmationBinding, value: unknown): Promise<ConfirmationStateCheck>;
}

/**
 * The long-lived dependencies, built once per container (Lambda) or process (local stack) and shared by every
 * request: clients keep their connections and the JWKS cache survives between invocations.
 */
export interface Services {
  config: AppConfig;
  doc: DocumentClient;
  tableName: string;
  store: DynamoDbIdempotencyStore;
  engine: IdempotencyEngine;
  clock: Clock;
  operationIds: OperationIdSigner;
  confirmations: ConfirmationSigner;
  auth: TokenVerifier;
  observer: IdempotencyObserver;
  logger: Logger;
  /** Clients of the payments provider and the ticket system (the email sender is the consumer's: createWorkers). */
  downstreams: Downstreams;
  /** Outbox events and the consumer's delivery claims (same table as the records). */
  outbox: OutboxStore;
  /** Ids of new outbox events (random). */
  newEventId: () => string;
}

export interface ServiceOverrides {
  clock?: Clock;
  observer?: IdempotencyObserver;
  logger?: Logger;
  doc?: DocumentClient;
  /** Engine tuning (tests shorten the in-progress wait, for instance). */
  engine?: Omit<EngineOptions, 'store' | 'clock' | 'observer'>;
  downstreams?: Partial<Downstreams>;
  /** Tests pin event ids (to make a transaction collide, for instance). */
  newEventId?: () => string;
}

export function createServices(config: AppConfig, overrides: ServiceOverrides = {}): Services {
  const clock = overrides.clock ?? systemClock;
  const logger = overrides.logger ?? defaultLogger;
  const observer = overrides.observer ?? createEngineObserver(logger);
  const doc = overrides.doc ?? createDocumentClient(config.dynamodbEndpoint);
  const store = new DynamoDbIdempotencyStore({ client: doc, tableName: config.tableName });
  // `unknown` answers suggest retrying after about one reconciler period.
  const engine = new IdempotencyEngine({
    unknownRetryAfterMs: config.sideEffects.reconcileIntervalMs,
    ...overrides.engine,
    store,
    clock,
    observer,
  });
  const secret = lazySecret(config.operationIdSecret);
  return {
    config,
    doc,
    tableName: config.tableName,
    store,
    engine,
    clock,
    ...createSigners(secret, clock),
    auth: createTokenVerifier(config.auth),
    observer,
    logger,
    downstreams: { ...createDownstreams(config.sideEffects), ...overrides.downstreams },
    outbox: new OutboxStore(doc, config.tableName),
    newEventId: overrides.newEventId ?? (() => `evt_${randomUUID()}`),
  };
}
