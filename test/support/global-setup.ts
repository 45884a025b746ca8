import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { makeDynamoDbLocalArchive, startDynamoDbLocal, type DynamoDbLocal } from '../../lambdas/local/dynamodb-local';

let dynamo: DynamoDbLocal | undefined;
let runScratch: string | undefined;
let archive: Promise<boolean> | undefined;

/**
 * One DynamoDB Local for the whole run (or the user's DYNAMODB_ENDPOINT); each test file makes its own tables. And
 * a folder of the run's own, where files share what more than one of them builds the same way (the team app's
 * cloud assembly, test/cdk/support.ts), removed when the run ends. And the Node 22 that test/artifact/ runs every
 * function under, installed here so that `npm test` (or vitest on any file) needs no step of its own first.
 */
export async function setup(project: TestProject) {
  runScratch = mkdtempSync(join(tmpdir(), 'idempotent-mcp-run-'));
  project.provide('runScratch', runScratch);
  [dynamo] = await Promise.all([startDynamoDbLocal(), installNode22()]);
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  project.provide('dynamodbEndpoint', dynamo.endpoint);
  // The emulator's class-data archive (once per machine): the run's later emulator starts (the lifecycle tests',
  // npm start's) take less time once it is made. Made beside the first files, not before them.
  archive = makeDynamoDbLocalArchive();
}

/**
 * The npm registry's node@22 (Lambda's nodejs22.x), into test/conformance/.tools apart from node_modules: the one install
 * that the conformance suite uses too. Once per clone; later runs find it there (`npm ls`, no registry).
 */
async function installNode22(): Promise<void> {
  const script = join(import.meta.dirname, '..', 'conformance', 'install.sh');
  await promisify(execFile)('bash', [script], { maxBuffer: 16 * 1024 * 1024 }).catch((err: { stderr?: string; message: string }) => {
    const reason = (err.stderr || err.message).trim().split('\n').slice(-3).join(' ');
    throw new Error(
      `Node 22 (the npm registry's node@22, which test/artifact/ runs the Lambda functions under) could not be installed into test/conformance/.tools by test/conformance/install.sh: ${reason}`,
    );
  });
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
