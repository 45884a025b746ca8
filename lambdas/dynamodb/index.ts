/**
 * `idempotent-mcp/dynamodb`: the DynamoDB adapters. The document client they share (over the lean signed-HTTP
 * transport, or over your own AWS SDK client with AwsSdkTransport), the idempotency store (options: client, table name, key
 * prefix, attention index on or off), the outbox store, the reconciler and its work list (the sparse attention index), and the table
 * definition the CDK constructs and the local setup share.
 */
export { DynamoDbIdempotencyStore, type DynamoDbStoreOptions } from '../store/dynamodb-idempotency-store';
export { TableSchema, ATTENTION_SHARDS, attentionPartitions, attentionPk, ensureTable, type AttentionKind } from '../store/table-schema';
export { AttentionIndexOffError } from '../store/attention-index';
export { awsClientConfig, createDocumentClient } from '../store/clients';
export {
  DocumentClient,
  ConditionalCheckFailedError,
  TransactionCanceledError,
  type CancellationReason,
  type Item,
  type ItemInput,
  type GetInput,
  type PutInput,
  type UpdateInput,
  type DeleteInput,
  type ConditionCheckInput,
  type TransactWriteItem,
  type TransactWriteInput,
  type QueryInput,
  type ScanInput,
  type Page,
} from '../store/document-client';
export { DynamoDbServiceError, type DynamoDbTransport, type DynamoDbOperation, type WireBody } from '../store/dynamodb-transport';
export { HttpTransport, type HttpTransportOptions, type AwsCredentials } from '../store/http-transport';
export { AwsSdkTransport } from '../store/aws-sdk-transport';
export { OutboxStore, type StoredOutboxEvent } from '../outbox/outbox-store';
export { toDeliveryView } from '../outbox/outbox-event';
export { SqsEventPublisher, type EventPublisher } from '../outbox/publisher';
export * from '../outbox/outbox-event';
export { Reconciler, ReconcilerDefaults, type ReconcilerOptions, type ReconcileReport, type ToolReconciler } from '../reconciler/reconciler';
