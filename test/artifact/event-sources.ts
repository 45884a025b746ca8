import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type GetRecordsCommandOutput,
  ListStreamsCommand,
  type _Record,
} from '@aws-sdk/client-dynamodb-streams';
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { LocalAwsAccount } from './aws-account';
import { DeployedTemplate, REGION } from './template';

import type { LocalDeployment } from './local-deploy';

/*
 * The event source mappings of a local deployment (local-deploy.ts) as Lambda's pollers run them, reading with the
 * function's role: the table's stream (filters, batches, retries from the first failed record) and the queues
 * (batches, partial batch failures, messages made visible again when time moves).
 */

/** Lambda's pollers for one deployment, with what they remember between polls (stream positions, delayed messages). */
export class EventSourcePollers {
  private readonly streamIterators = new Map<string, string>();
  private readonly queueAttributesRead = new Set<string>();
  /** Messages a function asked to see again later (their visibility), released when time moves past it. */
  private readonly delayed: Array<{ triggerId: string; receiptHandle: string; visibleAt: number }> = [];

  constructor(private readonly deployment: LocalDeployment) {}

  private clientConfig(functionId: string) {
    return {
      endpoint: this.deployment.account.endpoint,
      region: REGION,
      credentials: this.deployment.account.credentialsOf(functionId),
      maxAttempts: 3,
    };
  }

  /** Marks the poller's requests (their identity is still the function's). */
  private static markPoller(client: { middlewareStack: any }) {
    client.middlewareStack.add(
      (next: any) => (args: any) => {
        args.request.headers[LocalAwsAccount.POLLER_HEADER] = '1';
        return next(args);
      },
      { step: 'build' },
    );
  }

  /** Reads the table stream as the DynamoDB event source mapping does, filters, batches and invokes. */
  async pumpStream(mappingId: string): Promise<{ invoked: number; records: number; failures: number }> {
    const d = this.deployment.deployed;
    const p = d.resolve(d.template.Resources[mappingId]!.Properties) as Record<string, any>;
    const fn = this.deployment.triggers.get(mappingId)!.functionId;
    const client = new DynamoDBStreamsClient(this.clientConfig(fn));
    EventSourcePollers.markPoller(client);
    const patterns = (p.FilterCriteria?.Filters ?? []).map((f: { Pattern: string }) => JSON.parse(f.Pattern));
    let invoked = 0;
    let seen = 0;
    let failures = 0;
    try {
      await client.send(
        new ListStreamsCommand({
          TableName: d.refs.get(DeployedTemplate.target(d.template.Resources[mappingId]!.Properties!.EventSourceArn)!),
        }),
      );
      const stream = await client.send(new DescribeStreamCommand({ StreamArn: p.EventSourceArn }));
      const records: _Record[] = [];
      for (const shard of stream.StreamDescription?.Shards ?? []) {
        let iterator = this.streamIterators.get(shard.ShardId!);
        if (!iterator) {
          iterator = (
            await client.send(
              new GetShardIteratorCommand({ StreamArn: p.EventSourceArn, ShardId: shard.ShardId!, ShardIteratorType: p.StartingPosition }),
            )
          ).ShardIterator!;
        }
        for (let page = 0; page < 100 && iterator; page++) {
          const got: GetRecordsCommandOutput = await client.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
          records.push(...(got.Records ?? []));
          if (got.NextShardIterator) this.streamIterators.set(shard.ShardId!, got.NextShardIterator);
          iterator = got.Records?.length ? got.NextShardIterator : undefined;
        }
      }
      seen = records.length;
      const events = records
        // As Lambda delivers them: the creation time in epoch seconds, the stream's ARN and region.
        .map((r) => ({
          ...r,
          dynamodb: {
            ...r.dynamodb,
            ApproximateCreationDateTime: r.dynamodb?.ApproximateCreationDateTime
              ? Math.floor(r.dynamodb.ApproximateCreationDateTime.getTime() / 1000)
              : undefined,
          },
          eventSourceARN: p.EventSourceArn,
          awsRegion: REGION,
        }))
        .filter((r) => patterns.length === 0 || patterns.some((pattern: unknown) => matchesFilter(pattern, r)));
      for (let i = 0; i < events.length; i += p.BatchSize) {
        let batch = events.slice(i, i + p.BatchSize);
        for (let attempt = 0; attempt <= (p.MaximumRetryAttempts ?? 0) && batch.length; attempt++) {
          invoked++;
          const answer = await this.deployment.invoke(mappingId, { Records: batch });
          if (answer.error) throw new Error(`${fn} failed on a stream batch: ${answer.error.errorMessage}`);
          const failed: string | undefined = answer.result?.batchItemFailures?.[0]?.itemIdentifier;
          if (!failed) break;
          failures++;
          // With ReportBatchItemFailures, the batch is retried from the first failed record.
          batch = batch.slice(batch.findIndex((r) => r.dynamodb?.SequenceNumber === failed));
        }
      }
    } finally {
      client.destroy();
    }
    return { invoked, records: seen, failures };
  }

  /** Polls the queue as the SQS event source mapping does: batches, partial batch failures, deletes what succeeded. */
  async pumpQueue(mappingId: string, rounds = 5): Promise<{ invoked: number; messages: number; failures: number }> {
    const d = this.deployment.deployed;
    const p = d.resolve(d.template.Resources[mappingId]!.Properties) as Record<string, any>;
    const fn = this.deployment.triggers.get(mappingId)!.functionId;
    const queueId = DeployedTemplate.target(d.template.Resources[mappingId]!.Properties!.EventSourceArn)!;
    const queueUrl = d.refs.get(queueId)!;
    const client = new SQSClient(this.clientConfig(fn));
    EventSourcePollers.markPoller(client);
    let invoked = 0;
    let messages = 0;
    let failures = 0;
    try {
      if (!this.queueAttributesRead.has(mappingId)) {
        // Lambda reads the queue's attributes when the mapping is created.
        await client.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }));
        this.queueAttributesRead.add(mappingId);
      }
      for (let round = 0; round < rounds; round++) {
        const got = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: Math.min(10, p.BatchSize),
            WaitTimeSeconds: 0,
            AttributeNames: ['All'],
            MessageAttributeNames: ['All'],
          }),
        );
        const received = got.Messages ?? [];
        if (!received.length) break;
        messages += received.length;
        const event = {
          Records: received.map((m) => ({
            messageId: m.MessageId,
            receiptHandle: m.ReceiptHandle,
            body: m.Body,
            attributes: m.Attributes,
            messageAttributes: m.MessageAttributes ?? {},
            md5OfBody: m.MD5OfBody,
            eventSource: 'aws:sqs',
            eventSourceARN: p.EventSourceArn,
            awsRegion: REGION,
          })),
        };
        invoked++;
        const answer = await this.deployment.invoke(mappingId, event);
        if (answer.error) throw new Error(`${fn} failed on an SQS batch: ${answer.error.errorMessage}`);
        const failed = new Set<string>((answer.result?.batchItemFailures ?? []).map((f: { itemIdentifier: string }) => f.itemIdentifier));
        failures += failed.size;
        for (const m of received) {
          if (failed.has(m.MessageId!)) {
            this.delayed.push({ triggerId: mappingId, receiptHandle: m.ReceiptHandle!, visibleAt: Number.POSITIVE_INFINITY });
            continue;
          }
          await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle! }));
        }
      }
    } finally {
      client.destroy();
    }
    return { invoked, messages, failures };
  }

  /**
   * The messages a function asked to see again once the deployment's clock has passed their time (their visibility
   * timeout, which the local SQS server counts in real time) made visible again.
   */
  async releaseDelayed() {
    const sqs = new SQSClient({
      endpoint: this.deployment.sqsEndpoint,
      region: REGION,
      credentials: { accessKeyId: 'clock', secretAccessKey: 'clock' },
    });
    try {
      for (const message of this.delayed.splice(0)) {
        const queueId = DeployedTemplate.target(
          this.deployment.deployed.template.Resources[message.triggerId]!.Properties!.EventSourceArn,
        )!;
        const url = this.deployment.account.queueUrls.get(this.deployment.deployed.refs.get(queueId)!)!;
        await sqs
          .send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: message.receiptHandle, VisibilityTimeout: 0 }))
          .catch(() => {});
      }
    } finally {
      sqs.destroy();
    }
  }
}

/** Lambda's event filtering (the EventBridge pattern syntax the mappings use): all keys must match. */
export function matchesFilter(pattern: unknown, value: unknown): boolean {
  if (Array.isArray(pattern)) {
    return pattern.some((rule) => {
      if (rule === null || typeof rule !== 'object') return value === rule;
      const [op, arg] = Object.entries(rule as Record<string, unknown>)[0]!;
      if (op === 'prefix') return typeof value === 'string' && value.startsWith(String(arg));
      if (op === 'exists') return (value !== undefined) === arg;
      if (op === 'anything-but') return Array.isArray(arg) ? !arg.includes(value) : value !== arg;
      throw new Error(`filter operator ${op} is not evaluated by the local event source`);
    });
  }
  if (pattern && typeof pattern === 'object') {
    if (!value || typeof value !== 'object') return false;
    return Object.entries(pattern as Record<string, unknown>).every(([key, sub]) =>
      matchesFilter(sub, (value as Record<string, unknown>)[key]),
    );
  }
  return value === pattern;
}
