import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, type TranslateConfig } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';

/** Local emulators accept any credentials; AWS uses the function's role. */
const localCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

/**
 * AWS SDK client settings for an endpoint override (DynamoDB Local, the local SQS server); none on AWS.
 *
 */
export function awsClientConfig(endpoint: string | undefined) {
  return endpoint ? { endpoint, region: process.env.AWS_REGION ?? 'us-east-1', credentials: localCredentials } : {};
}

/**
 * How the DynamoDB client made here behaves, as AWS recommends for Lambda. Region and credentials come from the
 * environment (the SDK's default chain: Lambda's role; a profile or SSO outside it); the SDK's standard retry mode
 * (its retry quota bounds retries across calls during an outage); keep-alive connections.
 */
export const DynamoDbClientDefaults = {
  /** Attempts per request, the first included: a brownout costs a call at most this many requests per write. */
  maxAttempts: 3,
  /** A connection DynamoDB does not accept this fast is dead (a TCP handshake in a region takes milliseconds). */
  connectionTimeoutMs: 1_000,
  /**
   * A request unanswered this long is abandoned and retried: a keep-alive socket whose path died while the
   * function was frozen otherwise hangs until the function's timeout. DynamoDB answers in milliseconds.
   */
  requestTimeoutMs: 3_000,
} as const;

/**
 * How values are written: `undefined` attributes are left out (optional record fields), class instances refused.
 * The document client shares its base client's config (lib-dynamodb's design), so a client passed in gets these
 * options too; they change nothing for a document that has no `undefined` in it.
 */
const DOCUMENT_TRANSLATE_CONFIG: TranslateConfig = {
  marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
};

/** Options of `createDynamoDbClient`. */
type DynamoDbClientOptions = NonNullable<Parameters<typeof createDynamoDbClient>[0]>;

/** The base client made here: the defaults, the emulator's endpoint when there is one, then `clientConfig`. */
export function createDynamoDbBaseClient(options: Omit<DynamoDbClientOptions, 'awsSdkV3Client'> = {}): DynamoDBClient {
  const { maxAttempts, connectionTimeoutMs, requestTimeoutMs } = DynamoDbClientDefaults;
  const agent = { keepAlive: true, maxSockets: 50 };
  const client = new DynamoDBClient({
    maxAttempts,
    requestHandler: new NodeHttpHandler({
      connectionTimeout: connectionTimeoutMs,
      requestTimeout: requestTimeoutMs,
      // Without it a breached request timeout is only logged (smithy keeps its old behaviour by default).
      throwOnRequestTimeout: true,
      httpAgent: new HttpAgent(agent),
      httpsAgent: new HttpsAgent(agent),
    }),
    ...awsClientConfig('endpoint' in options ? options.endpoint : process.env.DYNAMODB_ENDPOINT),
    ...options.clientConfig,
  });
  // With no logger the SDK logs to a no-op one, yet on every refused request (each replay, conflict and follower is
  // a refused claim) it still copies the whole request for that log first: a tenth of a replay's CPU. Given a logger,
  // the SDK logs as it always does.
  if (!options.clientConfig?.logger) client.middlewareStack.remove('loggerMiddleware');
  return client;
}

/**
 * The document client of a base client made here, which it owns: its `destroy()` closes the base's sockets.
 * lib-dynamodb's own `destroy()` does nothing by design (the base client is its caller's, who destroys it).
 */
class OwningDocumentClient extends DynamoDBDocumentClient {
  constructor(base: DynamoDBClient) {
    super(base, DOCUMENT_TRANSLATE_CONFIG);
  }
  override destroy(): void {
    closeDynamoDbClient(this);
  }
}

/**
 * The one way every path (the functions, `npm start`, the ops CLI, the examples, the bench) makes its DynamoDB
 * client: the AWS SDK's document client over `awsSdkV3Client` when given, else over a client made here as AWS
 * recommends for Lambda: region and credentials from the environment, the standard retry mode with 3 attempts per
 * request, keep-alive connections, a 1 s connection timeout and a 3 s request timeout. `destroy()` closes the sockets of a client made here (a CLI or a test exits
 * sooner); over your own `awsSdkV3Client` it does nothing (lib-dynamodb's design): `destroy()` that client.
 * @public
 */
export function createDynamoDbClient(
  options: {
    /**
     * Your own DynamoDB client (a credentials chain, a retry strategy, X-Ray or OpenTelemetry instrumentation), used
     * as it is configured; as Powertools' `DynamoDBPersistenceLayer` takes `awsSdkV3Client`.
     */
    awsSdkV3Client?: DynamoDBClient;
    /**
     * Settings over those defaults for the client made here; ignored with `awsSdkV3Client`.
     * The SDK's logger middleware runs only when this gives a `logger` (with none it would log nothing).
     */
    clientConfig?: DynamoDBClientConfig;
    /**
     * An emulator's endpoint (DynamoDB Local: any credentials, the region from `AWS_REGION`). Default the
     * `DYNAMODB_ENDPOINT` variable; unset on AWS, where the SDK resolves the endpoint itself (it honours
     * `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_USE_FIPS_ENDPOINT` and `AWS_USE_DUALSTACK_ENDPOINT`).
     */
    endpoint?: string;
  } = {},
): DynamoDBDocumentClient {
  if (options.awsSdkV3Client) return DynamoDBDocumentClient.from(options.awsSdkV3Client, DOCUMENT_TRANSLATE_CONFIG);
  return new OwningDocumentClient(createDynamoDbBaseClient(options));
}

/**
 * Closes the client's idle connections (a CLI or a test exits sooner). The document client's own `destroy()` does
 * nothing by design; its base client's request handler holds the sockets.
 */
export function closeDynamoDbClient(client: DynamoDBDocumentClient | DynamoDBClient): void {
  client.config.requestHandler.destroy?.();
}
