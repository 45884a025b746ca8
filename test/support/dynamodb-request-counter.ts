import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/** DynamoDB requests sent through one client, by operation (PutItem, TransactWriteItems, ...). */
export interface RequestCounter {
  readonly byOperation: Readonly<Record<string, number>>;
  total(): number;
  reset(): void;
}

/**
 * Counts every HTTP request the client sends to DynamoDB, retries included: a middleware in the deserialize step,
 * inside the SDK's retry loop, reading the operation from the `X-Amz-Target` header. A document client shares its
 * base client's stack, so counting on either counts both. Used by the tests (request budgets) and the bench
 * (requests per call); it imports nothing from vitest.
 */
export function countDynamoDbRequests(client: DynamoDBClient | DynamoDBDocumentClient): RequestCounter {
  const byOperation: Record<string, number> = {};
  (client.middlewareStack as DynamoDBClient['middlewareStack']).add(
    (next) => async (args) => {
      const headers = (args.request as { headers?: Record<string, string> } | undefined)?.headers ?? {};
      const target = headers['x-amz-target'] ?? headers['X-Amz-Target'] ?? 'unknown.unknown';
      const operation = target.split('.').pop() ?? target;
      byOperation[operation] = (byOperation[operation] ?? 0) + 1;
      return next(args);
    },
    { step: 'deserialize', name: 'countDynamoDbRequests', override: true },
  );
  return {
    byOperation,
    total: () => Object.values(byOperation).reduce((sum, n) => sum + n, 0),
    reset: () => {
      for (const operation of Object.keys(byOperation)) delete byOperation[operation];
    },
  };
}
