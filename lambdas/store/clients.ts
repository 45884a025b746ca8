import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
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

/**
 * The AWS SDK's document client, honouring DYNAMODB_ENDPOINT like the lean one; the approval store uses it (issue 22
 * moves every store onto it).
 */
export function createSdkDocumentClient(endpoint = process.env.DYNAMODB_ENDPOINT): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(new DynamoDBClient(awsClientConfig(endpoint)), { marshallOptions: { removeUndefinedValues: true } });
}
