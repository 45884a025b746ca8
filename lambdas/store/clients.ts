import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/** Local emulators accept any credentials; AWS uses the function's role. */
const localCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

export function awsClientConfig(endpoint: string | undefined) {
  return endpoint
    ? { endpoint, region: process.env.AWS_REGION ?? 'us-east-1', credentials: localCredentials }
    : {};
}

/** The one way to build the DynamoDB document client: honours DYNAMODB_ENDPOINT (DynamoDB Local). */
export function createDocumentClient(endpoint = process.env.DYNAMODB_ENDPOINT): DynamoDBDocumentClient {
  const client = new DynamoDBClient({ ...awsClientConfig(endpoint), maxAttempts: 3 });
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
  });
}
