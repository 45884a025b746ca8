import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { AwsSdkTransport } from '../../lambdas/store/aws-sdk-transport';
import { DocumentClient } from '../../lambdas/store/document-client';
import { HttpTransport } from '../../lambdas/store/http-transport';

/** DynamoDB requests sent through one client, by operation (PutItem, TransactWriteItems, ...). */
export interface RequestCounter {
  readonly byOperation: Readonly<Record<string, number>>;
  total(): number;
  reset(): void;
}

/**
 * Counts every HTTP request the client sends to DynamoDB, retries included. On the package's HTTP transport, its
 * request listener (called per attempt); on an AWS SDK client, a middleware in the deserialize step, inside the
 * retry loop, reading the operation from the `X-Amz-Target` header. Used by the tests (request budgets) and the
 * bench (requests per call); it imports nothing from vitest.
 */
export function countDynamoDbRequests(client: DocumentClient | DynamoDBClient | DynamoDBDocumentClient): RequestCounter {
  const byOperation: Record<string, number> = {};
  const count = (operation: string) => {
    byOperation[operation] = (byOperation[operation] ?? 0) + 1;
  };
  const transport = client instanceof DocumentClient ? client.transport : undefined;
  if (transport instanceof HttpTransport) transport.onRequest(count);
  else {
    const sdkClient = transport instanceof AwsSdkTransport ? transport.client : (client as DynamoDBClient);
    if (transport && !(transport instanceof AwsSdkTransport)) throw new TypeError('countDynamoDbRequests: unknown transport');
    // A document client shares its base client's stack: counting on either counts both.
    (sdkClient.middlewareStack as DynamoDBClient['middlewareStack']).add(
      (next) => async (args) => {
        const headers = (args.request as { headers?: Record<string, string> } | undefined)?.headers ?? {};
        const target = headers['x-amz-target'] ?? headers['X-Amz-Target'] ?? 'unknown.unknown';
        count(target.split('.').pop() ?? target);
        return next(args);
      },
      { step: 'deserialize', name: 'countDynamoDbRequests', override: true },
    );
  }
  return {
    byOperation,
    total: () => Object.values(byOperation).reduce((sum, n) => sum + n, 0),
    reset: () => {
      for (const operation of Object.keys(byOperation)) delete byOperation[operation];
    },
  };
}
