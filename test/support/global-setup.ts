import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { makeDynamoDbLocalArchive, startDynamoDbLocal, type DynamoDbLocal } from '../../local/dynamodb-local';

let dynamo: DynamoDbLocal | undefined;
let runScratch: string | undefined;
let archive: Promise<boolean> | undefined;

/**
 * One DynamoDB Local for the whole run (or the user's DYNAMODB_ENDPOINT); each test file makes its own tables. And
 * a folder of the run's own, where files share what more than one of them builds the same way (the team app's
 * cloud assembly, test/cdk/support.ts), removed when the run ends.
 */
export async function setup(project: TestProject) {
  runScratch = mkdtempSync(join(tmpdir(), 'idempotent-mcp-run-'));
  project.provide('runScratch', runScratch);
  dynamo = await startDynamoDbLocal();
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  project.provide('dynamodbEndpoint', dynamo.endpoint);
  // The emulator's class-data archive (once per machine): the run's later emulator starts (the lifecycle tests',
  // npm start's) take less time once it is made. Made beside the first files, not before them.
  archive = makeDynamoDbLocalArchive();
}

export async function teardown() {
  await archive;
  await dynamo?.stop();
  if (runScratch) rmSync(runScratch, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
    runScratch: string;
  }
}
