import { Duration, Validations } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Construct } from 'constructs';
import { environmentOf } from '../../lambdas/config';
import { OUTBOX_EVENT_SK, outboxEventPkPrefix } from '../../lambdas/core/keys';
import { TableSchema } from '../../lambdas/store/table-schema';
import type { IdempotencyTable, TableItemAction } from './idempotency-store';
import type { OutboxQueue } from './outbox-queue';
import { handlerEntry } from '../bundling';
import { commonFunctionProps, ServiceFunction, type CommonFunctionProps } from './service-function';

/**
 * Props of `OutboxRelayFunction`: the table, the queue, its batch, the key prefix, the function's settings.
 */
export interface OutboxRelayFunctionProps extends CommonFunctionProps {
  /** Its table must have a stream (NEW_IMAGE): the relay reads committed outbox events from it. */
  readonly store: IdempotencyTable;
  readonly queue: OutboxQueue;
  /** @default Duration.seconds(30) */
  readonly timeout?: Duration;
  /**
   * Stream records per invocation.
   * @default 50
   */
  readonly batchSize?: number;
  /**
   * Whose events it relays on a shared table (the endpoint's TABLE_KEY_PREFIX): the stream filter passes only events
   * whose key carries it, and the function gets it as TABLE_KEY_PREFIX.
   * @default none: the unprefixed endpoint's events only
   */
  readonly keyPrefix?: string;
}

/**
 * The relay only records each send on the event (send count, next look for the sweep).
 */
export const RELAY_TABLE_ACTIONS: TableItemAction[] = ['UpdateItem'];

/**
 * Moves committed outbox events to the queue as they commit: a DynamoDB Streams event source filtered to the
 * INSERT of outbox event items, so the function never wakes for records, orders or delivery markers, nor for its
 * own send bookkeeping (a MODIFY). Failed records are reported per item; records that still fail after the bounded
 * retries are not lost: the event stays pending in the table and the reconciler's sweep sends it.
 */
export class OutboxRelayFunction extends Construct {
  readonly handler: ServiceFunction;

  constructor(scope: Construct, id: string, props: OutboxRelayFunctionProps) {
    super(scope, id);
    if (!props.store.table.tableStreamArn) {
      throw new Error(
        'OutboxRelayFunction: the table has no stream; an existing table needs its stream (NEW_IMAGE) enabled and its tableStreamArn given (Table.fromTableAttributes)',
      );
    }
    this.handler = new ServiceFunction(this, 'Handler', {
      ...commonFunctionProps(props),
      entry: handlerEntry('relay'),
      description: 'Outbox relay: committed outbox events from the table stream to SQS',
      timeout: props.timeout ?? Duration.seconds(30),
      environment: environmentOf({
        tableName: props.store.tableName,
        tableKeyPrefix: props.keyPrefix || undefined,
        outboxQueueUrl: props.queue.queue.queueUrl,
      }),
    });
    props.store.grantItems(this.handler.role, RELAY_TABLE_ACTIONS);
    props.queue.grantSend(this.handler.role);

    this.handler.function.addEventSource(
      new DynamoEventSource(props.store.table, {
        // From the oldest record still in the stream: events committed while the relay was being deployed are sent.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: props.batchSize ?? 50,
        maxBatchingWindow: Duration.seconds(0),
        reportBatchItemFailures: true,
        bisectBatchOnError: true,
        retryAttempts: 5,
        maxRecordAge: Duration.hours(1),
        filters: [
          lambda.FilterCriteria.filter({
            eventName: lambda.FilterRule.isEqual('INSERT'),
            dynamodb: {
              Keys: {
                // Only this endpoint's events (pk `<keyPrefix>OUTBOX#<id>`): another endpoint's on the table never wake it.
                [TableSchema.partitionKey]: { S: lambda.FilterRule.beginsWith(outboxEventPkPrefix(props.keyPrefix)) },
                [TableSchema.sortKey]: { S: lambda.FilterRule.isEqual(OUTBOX_EVENT_SK) },
              },
            },
          }),
        ],
      }),
    );
    Validations.of(this.handler.role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        "dynamodb:ListStreams, added by the DynamoDB event source, supports no resource-level permission; reading the stream itself is scoped to this table's stream ARN.",
    });
  }
}
