import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { awsClientConfig, closeDynamoDbClient, createDynamoDbClient } from '../store/clients';
// The endpoint's outputs that name what the tool works on.
import { StackOutput } from '../../lib/stack-outputs';
import { readLocalState } from './local-state';
import { ReviewInputError } from './review-types';

/** Which deployment the review tool works on, and who is at the keyboard. */
export interface Target {
  /** For messages: "local npm start", "stack idempotent-mcp", "table my-table". */
  name: string;
  doc: DynamoDBDocumentClient;
  tableName: string;
  /** Whose records to review on a shared table (`TABLE_KEY_PREFIX`: a gateway's upstream's); none: an endpoint's. */
  keyPrefix?: string;
  queue: QueueTarget;
  who: () => Promise<string>;
  close(): void;
}

/** The outbox queue and its dead-letter queue: only `redrive` needs them. */
interface QueueTarget {
  sqs: SQSClient;
  queueUrl?: string;
  deadLetterQueueUrl: () => Promise<string | undefined>;
}

export interface TargetOptions {
  /** A deployed stack: its outputs name the table and queues. */
  stack?: string;
  table?: string;
  queue?: string;
  /** Whose records (`--key-prefix`); with `--stack`, the stack's TableKeyPrefix output when not given. */
  keyPrefix?: string;
  /** Where a running `npm start` keeps its state (default `.local` in the working directory). */
  localDir?: string;
}

/**
 * Locally, with no flags: the table and queues of the running `npm start` (its `.local/stack.json`). Against AWS:
 * `--stack` (its outputs) or `--table` / `--queue`, with the SDK's default credential and region chain.
 */
export async function resolveTarget(options: TargetOptions): Promise<Target> {
  if (options.stack && (options.table || options.queue)) throw new ReviewInputError('give --stack, or --table/--queue, not both');
  if (options.stack || options.table || options.queue) return awsTarget(options);
  const dir = resolve(options.localDir ?? '.local');
  const local = await readLocalState(dir);
  if (!local)
    throw new ReviewInputError(
      `no running idempotent-mcp dev or npm start found (${dir}/stack.json): start one, or name a deployment with --stack or --table`,
    );
  const doc = createDynamoDbClient({ endpoint: local.dynamodbEndpoint });
  const sqs = new SQSClient({ ...awsClientConfig(local.sqsEndpoint), maxAttempts: 3 });
  return {
    name: 'local npm start',
    doc,
    tableName: local.tableName,
    ...(options.keyPrefix ? { keyPrefix: options.keyPrefix } : {}),
    queue: { sqs, queueUrl: local.queueUrl, deadLetterQueueUrl: async () => local.deadLetterQueueUrl },
    who: async () => userInfo().username,
    close: () => {
      closeDynamoDbClient(doc);
      sqs.destroy();
    },
  };
}

async function awsTarget(options: TargetOptions): Promise<Target> {
  let tableName = options.table;
  let queueUrl = options.queue;
  let deadLetterQueueUrl: string | undefined;
  let keyPrefix = options.keyPrefix;
  if (options.stack) {
    const cfn = new CloudFormationClient({});
    try {
      const { Stacks } = await cfn.send(new DescribeStacksCommand({ StackName: options.stack }));
      const outputs = new Map((Stacks?.[0]?.Outputs ?? []).map((o) => [o.OutputKey, o.OutputValue]));
      tableName = outputs.get(StackOutput.table);
      queueUrl = outputs.get(StackOutput.queue);
      deadLetterQueueUrl = outputs.get(StackOutput.deadLetterQueue);
      keyPrefix ??= outputs.get(StackOutput.tableKeyPrefix);
      if (!tableName) throw new ReviewInputError(`stack ${options.stack} has no ${StackOutput.table} output`);
    } catch (err) {
      if ((err as Error).name === 'ValidationError')
        throw new ReviewInputError(`no stack named ${options.stack}: ${(err as Error).message}`);
      throw err;
    } finally {
      cfn.destroy();
    }
  }
  if (!tableName) throw new ReviewInputError('--table is required with --queue');
  // An operator's machine: the AWS SDK's credential and region chain (profiles, SSO), not a function's environment.
  const doc = createDynamoDbClient({ endpoint: undefined });
  const sqs = new SQSClient({ maxAttempts: 3 });
  let caller: Promise<string> | undefined;
  return {
    name: options.stack ? `stack ${options.stack}` : `table ${tableName}`,
    doc,
    tableName,
    ...(keyPrefix ? { keyPrefix } : {}),
    queue: {
      sqs,
      queueUrl,
      deadLetterQueueUrl: async () => deadLetterQueueUrl ?? (queueUrl ? deadLetterQueueOf(sqs, queueUrl) : undefined),
    },
    // The review log names the caller's AWS identity (an assumed role's session, a user).
    who: () =>
      (caller ??= (async () => {
        const sts = new STSClient({});
        try {
          const { Arn } = await sts.send(new GetCallerIdentityCommand({}));
          if (!Arn) throw new Error('STS returned no caller identity');
          return Arn;
        } finally {
          sts.destroy();
        }
      })()),
    close: () => {
      closeDynamoDbClient(doc);
      sqs.destroy();
    },
  };
}

/** The dead-letter queue named by the queue's redrive policy. */
async function deadLetterQueueOf(sqs: SQSClient, queueUrl: string): Promise<string | undefined> {
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['RedrivePolicy'] }));
  const arn = Attributes?.RedrivePolicy
    ? (JSON.parse(Attributes.RedrivePolicy) as { deadLetterTargetArn?: string }).deadLetterTargetArn
    : undefined;
  if (!arn) return undefined;
  const [, , , , account, name] = arn.split(':');
  const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: name, QueueOwnerAWSAccountId: account }));
  return QueueUrl;
}
