import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { WorkerConfig } from '../config';
import { systemClock, type Clock } from '../core/clock';
import { logger as defaultLogger } from '../observability/logger';
import { createDynamoDbClient } from '../store/clients';
import { DynamoDbIdempotencyStore } from '../store/dynamodb-idempotency-store';
import { OutboxStore } from '../outbox/outbox-store';

/**
 * What the background functions (the outbox relay, its consumer and the reconciler) run on: the table's records
 * and outbox events, the clock and a logger. No engine, token verifier, signers or downstream clients: no worker
 * serves an MCP request, and the clients a tool's reconcile hook or a delivery needs are the endpoint's own.
 */
export interface WorkerServices {
  config: WorkerConfig;
  doc: DynamoDBDocumentClient;
  tableName: string;
  store: DynamoDbIdempotencyStore;
  clock: Clock;
  logger: Logger;
  /** Outbox events and the consumer's delivery claims (same table as the records). */
  outbox: OutboxStore;
}

/**
 * What `createWorkerServices` takes instead of what it builds from the config.
 */
export interface WorkerServiceOverrides {
  clock?: Clock;
  logger?: Logger;
  doc?: DynamoDBDocumentClient;
}

/**
 * Built once per container (Lambda) or process (local stack): the clients keep their connections.
 */
export function createWorkerServices(config: WorkerConfig, overrides: WorkerServiceOverrides = {}): WorkerServices {
  const doc = overrides.doc ?? createDynamoDbClient({ endpoint: config.dynamodbEndpoint });
  return {
    config,
    doc,
    tableName: config.tableName,
    store: new DynamoDbIdempotencyStore({ client: doc, tableName: config.tableName, keyPrefix: config.tableKeyPrefix }),
    clock: overrides.clock ?? systemClock,
    logger: overrides.logger ?? defaultLogger,
    outbox: new OutboxStore(doc, config.tableName, { enabled: config.sideEffects.outboxEnabled, keyPrefix: config.tableKeyPrefix }),
  };
}
