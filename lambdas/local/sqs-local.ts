import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  SetQueueAttributesCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';
import { awsClientConfig } from '../store/clients';

export interface LocalQueue {
  endpoint: string;
  queueUrl: string;
  deadLetterQueueUrl: string;
  /** Stops the SQS server if we started it; a no-op for a user-provided SQS_ENDPOINT. */
  stop(): Promise<void>;
}

export interface StartLocalQueueOptions {
  /** An SQS-compatible endpoint to use instead of starting one (SQS_ENDPOINT). */
  endpoint?: string;
  queueName: string;
  /** Must exceed the consumer's lease: a crashed consumer's message comes back after it. */
  visibilityTimeoutSeconds: number;
  /** The redrive policy: receives before the dead-letter queue (the consumer must be told the same). */
  maxReceiveCount: number;
  port?: number;
}

/**
 * The outbox queue and its dead-letter queue on a local SQS-compatible server: fauxqs in this process (in memory,
 * on loopback only), unless SQS_ENDPOINT names one. Events that were on the queue when it stopped are not lost:
 * they are still pending in the table, and the sweep sends them again.
 */
export async function startLocalQueue(options: StartLocalQueueOptions): Promise<LocalQueue> {
  let endpoint = options.endpoint;
  let stopServer = async () => {};
  if (!endpoint) {
    const app = buildApp({ logger: false });
    const address = await app.listen({ port: options.port ?? 0, host: '127.0.0.1' });
    endpoint = `http://127.0.0.1:${new URL(address).port}`;
    stopServer = async () => {
      await app.close();
    };
  }
  const sqs = new SQSClient({ ...awsClientConfig(endpoint), maxAttempts: 3 });
  try {
    const deadLetterQueueUrl = await ensureQueue(sqs, `${options.queueName}-dlq`, { MessageRetentionPeriod: '1209600' });
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ['QueueArn'] }));
    const queueUrl = await ensureQueue(sqs, options.queueName, {
      VisibilityTimeout: String(options.visibilityTimeoutSeconds),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes?.QueueArn, maxReceiveCount: options.maxReceiveCount }),
    });
    return { endpoint, queueUrl, deadLetterQueueUrl, stop: stopServer };
  } catch (err) {
    await stopServer();
    throw err;
  } finally {
    sqs.destroy();
  }
}

/** Creates the queue, or brings an existing one (a persistent SQS_ENDPOINT) to these attributes. */
async function ensureQueue(sqs: SQSClient, name: string, attributes: Record<string, string>): Promise<string> {
  try {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
    if (QueueUrl) return QueueUrl;
  } catch (err) {
    if (!/QueueNameExists|QueueAlreadyExists/.test((err as Error).name)) throw err;
  }
  const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: name }));
  if (!QueueUrl) throw new Error(`queue ${name} has no URL`);
  await sqs.send(new SetQueueAttributesCommand({ QueueUrl, Attributes: attributes }));
  return QueueUrl;
}
