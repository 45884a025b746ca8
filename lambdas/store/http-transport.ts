import { createHash, createHmac, randomUUID, type BinaryLike } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { SignatureV4 } from '@smithy/signature-v4';
import { fullJitterBackoffMs } from '../core/backoff';
import { DynamoDbServiceError, errorCodeOf, type DynamoDbOperation, type DynamoDbTransport, type WireBody } from './dynamodb-transport';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  /** When they stop working; a provider is asked again shortly before. */
  expiration?: Date;
}

export interface HttpTransportOptions {
  /** Default: `AWS_ENDPOINT_URL_DYNAMODB`, else `AWS_ENDPOINT_URL`, else the region's public endpoint. */
  endpoint?: string;
  /** Default: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`. */
  region?: string;
  /**
   * Default: the function's execution-role credentials, from the environment Lambda sets (read at every request,
   * so a rotation is picked up). Outside Lambda, pass a provider: for example `fromNodeProviderChain()` of
   * `@aws-sdk/credential-providers`, or use the AWS SDK transport.
   */
  credentials?: AwsCredentials | (() => Promise<AwsCredentials>);
  /** Attempts per operation, the first included (as the AWS SDK's `maxAttempts`). Default 3. */
  maxAttempts?: number;
  /**
   * A request whose socket stays silent this long is abandoned and retried like a lost connection (a keep-alive
   * socket whose path died while the function was frozen, say). Default 10 s.
   */
  socketTimeoutMs?: number;
  /** Called as every HTTP request is sent, retries included (request budgets in tests, requests per call in the bench). */
  onRequest?: (operation: DynamoDbOperation) => void;
}

/** DynamoDB's JSON protocol: one POST per operation, named in `X-Amz-Target`. */
const TARGET_PREFIX = 'DynamoDB_20120810.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';

/**
 * Modelled on the AWS SDK v3 standard retry mode (and the DynamoDB client's own retryable errors): throttling (a
 * longer backoff) and transient failures are retried. A refusal (a failed condition, a cancelled transaction, a
 * validation error) is an answer, never retried.
 */
const THROTTLING = new Set([
  'ThrottlingException',
  'Throttling',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'TooManyRequestsException',
  'TransactionInProgressException',
  'LimitExceededException',
]);
const TRANSIENT_CODES = new Set([
  'InternalServerError',
  'InternalFailure',
  'ServiceUnavailable',
  'RequestTimeout',
  'RequestTimeoutException',
  'ReplicatedWriteConflictException',
]);
const THROTTLING_STATUS = 429;
const TRANSIENT_STATUS = new Set([500, 502, 503, 504]);
/** Connection failures, as Node names them: the request may or may not have reached DynamoDB. */
const NETWORK_ERRORS = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const DEFAULT_SOCKET_TIMEOUT_MS = 10_000;
const BACKOFF_BASE_MS = 100;
const THROTTLING_BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 20_000;

/** SHA-256 and its HMAC for the signer, from node:crypto (the shape of the SDK's hash classes). */
class Sha256 {
  private hash;
  private readonly secret?: BinaryLike;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.secret = secret instanceof ArrayBuffer ? Buffer.from(secret) : (secret as BinaryLike | undefined);
    this.hash = this.start();
  }
  update(data: Uint8Array | string): void {
    this.hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
  reset(): void {
    this.hash = this.start();
  }
  private start() {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', this.secret);
  }
}

/** Lambda hands a function its role's credentials in these variables. */
async function credentialsFromEnvironment(): Promise<AwsCredentials> {
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = process.env;
  if (!accessKeyId || !secretAccessKey) {
    throw new Error('no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set (pass `credentials` outside Lambda)');
  }
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}

export function defaultEndpoint(region: string): string {
  const configured = process.env.AWS_ENDPOINT_URL_DYNAMODB || process.env.AWS_ENDPOINT_URL;
  if (configured) return configured;
  return `https://dynamodb.${region}.${region.startsWith('cn-') ? 'amazonaws.com.cn' : 'amazonaws.com'}`;
}

/** Binary attributes travel as base64 in DynamoDB's JSON: encoded on the way out, decoded on the way back. */
function encodeBinary(this: Record<string, unknown>, key: string, value: unknown) {
  // The raw value: JSON.stringify has already turned a Buffer into { type: 'Buffer', data } by its toJSON.
  const raw = this[key];
  return raw instanceof Uint8Array ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') : value;
}
const decodeBinary = (key: string, value: unknown) => {
  if (key === 'B' && typeof value === 'string') return Buffer.from(value, 'base64');
  if (key === 'BS' && Array.isArray(value) && value.every((entry) => typeof entry === 'string')) return value.map((entry) => Buffer.from(entry, 'base64'));
  return value;
};

class TransientHttpError extends Error {}

/**
 * DynamoDB over signed HTTPS, without the AWS SDK: SigV4 by the SDK's own signer (`@smithy/signature-v4`), one
 * keep-alive connection pool with a socket timeout, and a retry policy modelled on the SDK's standard mode (what is
 * retried, exponential backoff with full jitter; the attempts the project always configured). A TransactWriteItems
 * without a ClientRequestToken gets one, kept across its retries, as the SDK does: a retried transaction whose first
 * attempt committed is answered as committed, not cancelled.
 * What it leaves out, by design: the credential chain beyond Lambda's environment (pass `credentials`), endpoint
 * rules beyond the region's public endpoint (pass `endpoint` for FIPS, dual-stack or a VPC endpoint), clock-skew
 * correction.
 */
export class HttpTransport implements DynamoDbTransport {
  private readonly url: URL;
  private readonly signer: SignatureV4;
  private readonly maxAttempts: number;
  private readonly socketTimeoutMs: number;
  private readonly agent: HttpAgent;
  private readonly send: typeof httpRequest;
  private readonly listeners: Array<(operation: DynamoDbOperation) => void> = [];

  constructor(options: HttpTransportOptions = {}) {
    const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
    this.url = new URL(options.endpoint ?? defaultEndpoint(region));
    if (this.url.protocol !== 'https:' && this.url.protocol !== 'http:') throw new Error(`DynamoDB endpoint must be http(s): ${this.url.href}`);
    if (this.url.search || this.url.hash) throw new Error(`DynamoDB endpoint must not carry a query or fragment: ${this.url.href}`);
    const credentials = options.credentials;
    this.signer = new SignatureV4({
      service: 'dynamodb',
      region,
      credentials: typeof credentials === 'function' ? memoizeCredentials(credentials) : credentials ? credentials : credentialsFromEnvironment,
      sha256: Sha256,
    });
    this.maxAttempts = options.maxAttempts ?? 3;
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1) throw new RangeError(`maxAttempts must be a whole number of at least 1 (got ${options.maxAttempts})`);
    this.socketTimeoutMs = options.socketTimeoutMs ?? DEFAULT_SOCKET_TIMEOUT_MS;
    if (!(this.socketTimeoutMs > 0)) throw new RangeError(`socketTimeoutMs must be positive (got ${options.socketTimeoutMs})`);
    const secure = this.url.protocol === 'https:';
    this.agent = secure ? new HttpsAgent({ keepAlive: true, maxSockets: 50 }) : new HttpAgent({ keepAlive: true, maxSockets: 50 });
    this.send = secure ? httpsRequest : httpRequest;
    if (options.onRequest) this.listeners.push(options.onRequest);
  }

  /** Adds a listener called before every HTTP attempt (see HttpTransportOptions.onRequest). */
  onRequest(listener: (operation: DynamoDbOperation) => void): void {
    this.listeners.push(listener);
  }

  async call(operation: DynamoDbOperation, input: WireBody): Promise<WireBody> {
    const body = JSON.stringify(
      operation === 'TransactWriteItems' && input.ClientRequestToken === undefined ? { ...input, ClientRequestToken: randomUUID() } : input,
      encodeBinary,
    );
    const contentLength = String(Buffer.byteLength(body));
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt(operation, body, contentLength);
      } catch (err) {
        const backoffBase = retryBackoffBase(err);
        if (backoffBase === undefined || attempt >= this.maxAttempts) throw err;
        await new Promise((resolve) => setTimeout(resolve, fullJitterBackoffMs(attempt - 1, { baseMs: backoffBase, capMs: BACKOFF_CAP_MS })));
      }
    }
  }

  destroy(): void {
    this.agent.destroy();
  }

  private async attempt(operation: DynamoDbOperation, body: string, contentLength: string): Promise<WireBody> {
    const signed = await this.signer.sign({
      method: 'POST',
      protocol: this.url.protocol,
      hostname: this.url.hostname,
      port: this.url.port ? Number(this.url.port) : undefined,
      path: this.url.pathname,
      query: {},
      headers: {
        host: this.url.host,
        'content-type': CONTENT_TYPE,
        'x-amz-target': `${TARGET_PREFIX}${operation}`,
        'content-length': contentLength,
      },
      body,
    });
    for (const listener of this.listeners) listener(operation);
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = this.send(this.url, { method: 'POST', agent: this.agent, headers: signed.headers }, (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.setTimeout(this.socketTimeoutMs, () =>
        req.destroy(Object.assign(new Error(`no answer from DynamoDB for ${this.socketTimeoutMs} ms`), { code: 'ETIMEDOUT' })),
      );
      req.end(body);
    });
    let parsed: WireBody | undefined;
    try {
      parsed = text ? (JSON.parse(text, decodeBinary) as WireBody) : {};
    } catch {
      parsed = undefined;
    }
    if (parsed && status >= 200 && status < 300) return parsed;
    const type = typeof parsed?.__type === 'string' ? (parsed.__type as string) : undefined;
    if (!parsed || !type) {
      // Not DynamoDB's answer (a proxy's, a load balancer's): worth another attempt only if it says it is transient.
      const message = `DynamoDB endpoint answered HTTP ${status} ${parsed ? 'without an error type' : 'with a body that is not JSON'}`;
      throw TRANSIENT_STATUS.has(status) || status === THROTTLING_STATUS ? new TransientHttpError(message) : new Error(message);
    }
    throw new DynamoDbServiceError(errorCodeOf(type), String(parsed.message ?? parsed.Message ?? ''), parsed, status);
  }
}

/** The base of the backoff when `err` is worth another attempt, undefined when it is not. */
function retryBackoffBase(err: unknown): number | undefined {
  if (err instanceof DynamoDbServiceError) {
    if (THROTTLING.has(err.code) || err.statusCode === THROTTLING_STATUS) return THROTTLING_BACKOFF_BASE_MS;
    if (TRANSIENT_CODES.has(err.code) || (err.statusCode !== undefined && TRANSIENT_STATUS.has(err.statusCode))) return BACKOFF_BASE_MS;
    return undefined;
  }
  // A lost or refused connection, a reset, an answer that is not DynamoDB's: the request may or may not have been
  // applied, which is why every write the adapters send is conditional (a retry of an applied write is refused,
  // not doubled). Missing credentials and other local errors are not retried.
  if (err instanceof TransientHttpError || NETWORK_ERRORS.has((err as NodeJS.ErrnoException)?.code ?? '')) return BACKOFF_BASE_MS;
  return undefined;
}

/** Asks the provider once, and again within five minutes of the credentials' expiry; callers meanwhile share one ask. */
function memoizeCredentials(provider: () => Promise<AwsCredentials>): () => Promise<AwsCredentials> {
  let held: AwsCredentials | undefined;
  let asking: Promise<AwsCredentials> | undefined;
  const fresh = (credentials: AwsCredentials) => !credentials.expiration || credentials.expiration.getTime() - Date.now() > 5 * 60_000;
  return async () => {
    if (held && fresh(held)) return held;
    asking ??= provider()
      .then((credentials) => (held = credentials))
      .finally(() => {
        asking = undefined;
      });
    return asking;
  };
}
