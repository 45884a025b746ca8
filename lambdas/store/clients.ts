import { DocumentClient } from './document-client';
import { HttpTransport, type HttpTransportOptions } from './http-transport';

/** Local emulators accept any credentials; AWS uses the function's role. */
const localCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

/** AWS SDK client settings for an endpoint override (the local SQS server); none on AWS. */
export function awsClientConfig(endpoint: string | undefined) {
  return endpoint
    ? { endpoint, region: process.env.AWS_REGION ?? 'us-east-1', credentials: localCredentials }
    : {};
}

/**
 * The one way the functions and the local stack build their DynamoDB client: the lean signed-HTTP transport,
 * honouring DYNAMODB_ENDPOINT (DynamoDB Local, any credentials). `options` are passed on (a credentials provider
 * outside Lambda, a request listener in tests).
 */
export function createDocumentClient(endpoint = process.env.DYNAMODB_ENDPOINT, options: HttpTransportOptions = {}): DocumentClient {
  return new DocumentClient(new HttpTransport({ ...awsClientConfig(endpoint), ...options }));
}
