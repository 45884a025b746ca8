/**
 * The port between the DynamoDB adapters and the wire: one call of one DynamoDB API operation, in DynamoDB's own
 * JSON (attribute values typed, `{ S: 'x' }`), with no AWS SDK type in it. Two transports implement it: a lean
 * signed-HTTP one (lambdas/store/http-transport.ts: what the functions ship, a fraction of the SDK's bytes and
 * start-up) and one over the AWS SDK's DynamoDB client (lambdas/store/aws-sdk-transport.ts: for a team that brings
 * its own configured client, and for operators' credential chains).
 */

/** The operations the adapters and the local setup use. */
export type DynamoDbOperation =
  | 'GetItem'
  | 'PutItem'
  | 'UpdateItem'
  | 'DeleteItem'
  | 'TransactWriteItems'
  | 'Query'
  | 'Scan'
  | 'CreateTable'
  | 'DeleteTable'
  | 'DescribeTable'
  | 'UpdateTimeToLive';

/** A request or answer body in DynamoDB's JSON. */
export type WireBody = Record<string, unknown>;

export interface DynamoDbTransport {
  /**
   * Sends one operation (retrying what is safe to retry, as the transport's policy says) and resolves with its
   * answer; a refusal by DynamoDB rejects with a DynamoDbServiceError, anything else (the network, credentials)
   * with the error as it came.
   */
  call(operation: DynamoDbOperation, input: WireBody): Promise<WireBody>;
  /** Closes idle connections (a CLI exits sooner); the transport stays usable. */
  destroy(): void;
}

/**
 * DynamoDB refused the request: `code` is its error code (`ConditionalCheckFailedException`,
 * `TransactionCanceledException`, `ResourceInUseException`, ...), `body` its error answer as it came, with the
 * fields some errors carry (`Item` of a refused conditional write, `CancellationReasons` of a transaction).
 */
export class DynamoDbServiceError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly body: WireBody,
    /** The HTTP status, when the transport knows it. */
    readonly statusCode?: number,
  ) {
    super(`${code}: ${message}`);
    this.name = code;
  }
}

/** The error code in a DynamoDB error answer (`com.amazonaws.dynamodb.v20120810#Code` or `Code`). */
export function errorCodeOf(type: string): string {
  return type.slice(type.lastIndexOf('#') + 1);
}
