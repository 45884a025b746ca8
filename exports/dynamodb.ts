/**
 * `idempotent-mcp/dynamodb`: the DynamoDB adapters. The AWS SDK document client they share (`createDynamoDbClient`,
 * over your own `DynamoDBClient` if you pass one), the idempotency store (options: client, table name, key
 * prefix, attention index on or off), the approval store (the people's decisions, beside the records they are about),
 * the lookup memos beside the records (`DynamoDbRecordMemos`), the outbox's message and publisher types, and the
 * table's creation for local setups and tests (`ensureTable`; `IdempotentMcpEndpoint` defines the same table). The
 * reconciler of a server of your own is `startReconciler` (`idempotent-mcp/mcp`).
 */
export { DynamoDbIdempotencyStore } from '../lambdas/store/dynamodb-idempotency-store';
export { DynamoDbApprovalStore } from '../lambdas/store/dynamodb-approval-store';
export { ensureTable } from '../lambdas/store/table-schema';
export { DynamoDbRecordMemos } from '../lambdas/store/dynamodb-record-memos';
export { createDynamoDbClient } from '../lambdas/store/clients';
export type { OutboxMessage } from '../lambdas/outbox/outbox-event';
export type { EventPublisher } from '../lambdas/outbox/publisher';
