import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal, type DynamoDbLocal } from '../../local/dynamodb-local';

let dynamo: DynamoDbLocal | undefined;

/** One DynamoDB Local for the whole run (or the user's DYNAMODB_ENDPOINT); each test file makes its own tables. */
export async function setup(project: TestProject) {
  dynamo = await startDynamoDbLocal();
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  project.provide('dynamodbEndpoint', dynamo.endpoint);
}

export async function teardown() {
  await dynamo?.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
  }
}
