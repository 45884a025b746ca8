import { DescribeTableCommand, DescribeTimeToLiveCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Match } from 'aws-cdk-lib/assertions';
import type { CfnQueue } from 'aws-cdk-lib/aws-sqs';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { Duration, App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { EnvVars } from '../../lambdas/config';
import { read as readEnv } from '../../lambdas/env-var';
import { IdempotentMcpStack } from '../../reference/cdk/idempotent-mcp-stack';
import { describe, expect, inject, it, vi } from 'vitest';
import { settingsFromContext } from '../../reference/cdk/context';
import { MCP_TABLE_ACTIONS } from '../../lib/constructs/mcp-function';
import { CONSUMER_TABLE_ACTIONS } from '../../lib/constructs/outbox-consumer';
import { OutboxQueue } from '../../lib/constructs/outbox-queue';
import { RELAY_TABLE_ACTIONS } from '../../lib/constructs/outbox-relay';
import { RECONCILER_TABLE_ACTIONS } from '../../lib/constructs/reconciler';
import { StackOutput } from '../../lib/stack-outputs';
import { MetricName } from '../../lambdas/observability/metrics';
import { receivesWithinBudget } from '../../lambdas/core/outbox-budget';
import { awsClientConfig, createDynamoDbClient } from '../../lambdas/store/clients';
import { ensureTable, TableSchema } from '../../lambdas/store/table-schema';
import {
  actionsOf,
  actionsOn,
  logicalId,
  partsOf,
  resourcesOf,
  serviceActions,
  statementsOfRole,
  synthStack,
  type Statement,
} from './support';

// One synth per configuration, shared by the tests below (bundling is skipped here; test/cdk/synth.test.ts bundles).
const base = synthStack();
const { template, stack } = base;
const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: any; DeletionPolicy?: string }>;
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

const tableId = logicalId(stack.endpoint.table);
const tableArn = { 'Fn::GetAtt': [tableId, 'Arn'] };
const queueArn = { 'Fn::GetAtt': [logicalId(stack.endpoint.queue!), 'Arn'] };
const functionIds = {
  mcp: logicalId(stack.endpoint.mcpFunction),
  relay: logicalId(stack.endpoint.relayFunction!),
  consumer: logicalId(stack.endpoint.consumerFunction!),
  reconciler: logicalId(stack.endpoint.reconcilerFunction),
};
const roleIds = {
  mcp: logicalId(stack.endpoint.mcpFunction.role!),
  relay: logicalId(stack.endpoint.relayFunction!.role!),
  consumer: logicalId(stack.endpoint.consumerFunction!.role!),
  reconciler: logicalId(stack.endpoint.reconcilerFunction.role!),
};
const fnProps = (id: string) => resources[id]!.Properties;
const env = (id: string): Record<string, unknown> => fnProps(id).Environment.Variables;

describe('the idempotency table', () => {
  const table = resources[tableId]!;

  it('is defined from TableSchema: keys, TTL attribute and the sparse attention index', () => {
    const { partitionKey, sortKey, ttlAttribute, attentionIndex } = TableSchema;
    expect(table.Properties.KeySchema).toEqual([
      { AttributeName: partitionKey, KeyType: 'HASH' },
      { AttributeName: sortKey, KeyType: 'RANGE' },
    ]);
    expect(table.Properties.TimeToLiveSpecification).toEqual({ AttributeName: ttlAttribute, Enabled: true });
    expect(table.Properties.GlobalSecondaryIndexes).toEqual([
      {
        IndexName: attentionIndex.name,
        KeySchema: [
          { AttributeName: attentionIndex.partitionKey, KeyType: 'HASH' },
          { AttributeName: attentionIndex.sortKey, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ]);
  });

  it('is on demand, encrypted, recoverable to the second, streams new images, and survives cdk destroy', () => {
    expect(table.Properties.BillingMode).toBe('PAY_PER_REQUEST');
    expect(table.Properties.SSESpecification).toEqual({ SSEEnabled: true });
    expect(table.Properties.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(table.Properties.StreamSpecification).toEqual({ StreamViewType: 'NEW_IMAGE' });
    expect(table.DeletionPolicy).toBe('Retain');
    expect(template.toJSON().Resources[tableId].UpdateReplacePolicy).toBe('Retain');
  });

  it('matches the table the local setup creates (ensureTable on DynamoDB Local): no drift between deploy and local', async () => {
    const client = new DynamoDBClient({ ...awsClientConfig(inject('dynamodbEndpoint')) });
    const name = `cdk-drift-${Date.now()}`;
    try {
      await ensureTable(createDynamoDbClient({ awsSdkV3Client: client }), name);
      const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
      const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
      const byName = (a: { AttributeName?: string }, b: { AttributeName?: string }) => a.AttributeName!.localeCompare(b.AttributeName!);
      expect([...Table!.AttributeDefinitions!].sort(byName)).toEqual([...table.Properties.AttributeDefinitions].sort(byName));
      expect(Table!.KeySchema).toEqual(table.Properties.KeySchema);
      const local = Table!.GlobalSecondaryIndexes!.map((i) => ({
        IndexName: i.IndexName,
        KeySchema: i.KeySchema,
        Projection: i.Projection,
      }));
      expect(local).toEqual(table.Properties.GlobalSecondaryIndexes);
      expect(TimeToLiveDescription?.AttributeName).toBe(table.Properties.TimeToLiveSpecification.AttributeName);
    } finally {
      client.destroy();
    }
  });

  it('can use a customer managed key that rotates and is kept as long as the table', () => {
    const cmk = synthStack({ customerManagedKey: 'true' });
    const json = cmk.template.toJSON().Resources;
    const keyId = logicalId(cmk.stack.endpoint.node.findChild('TableKey') as never);
    expect(json[keyId].Properties.EnableKeyRotation).toBe(true);
    expect(json[keyId].DeletionPolicy).toBe('Retain');
    expect(json[logicalId(cmk.stack.endpoint.table)].Properties.SSESpecification).toEqual({
      SSEEnabled: true,
      SSEType: 'KMS',
      KMSMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] },
    });
    // Writers get the exact data-key actions DynamoDB uses on their behalf (no GenerateDataKey* wildcards), on this key.
    const keyArn = { 'Fn::GetAtt': [keyId, 'Arn'] };
    const mcpStatements = statementsOfRole(cmk.template, logicalId(cmk.stack.endpoint.mcpFunction.role!));
    expect(actionsOn(mcpStatements, keyArn)).toEqual([
      'kms:Decrypt',
      'kms:DescribeKey',
      'kms:Encrypt',
      'kms:GenerateDataKey',
      'kms:GenerateDataKeyWithoutPlaintext',
      'kms:ReEncryptFrom',
      'kms:ReEncryptTo',
    ]);
    // The relay reads the encrypted stream: it may decrypt.
    expect(actionsOn(statementsOfRole(cmk.template, logicalId(cmk.stack.endpoint.relayFunction!.role!)), keyArn)).toContain('kms:Decrypt');
  });
});

describe('the outbox queue', () => {
  const [[dlqId, dlq]] = ofType('AWS::SQS::Queue').filter(([id]) => id === logicalId(stack.endpoint.deadLetterQueue!)) as [[string, any]];
  const queue = resources[logicalId(stack.endpoint.queue!)]!;

  it('retries a delivery for its time budget (24 h by default) before the dead-letter queue, and receives outlast it', () => {
    const consumerEnv = env(functionIds.consumer);
    expect(consumerEnv.OUTBOX_DELIVERY_BUDGET_SECONDS).toBe(String(24 * 3600));
    expect(JSON.stringify(consumerEnv.OUTBOX_DEAD_LETTER_QUEUE_URL)).toContain(dlqId);
    // The redrive is only a backstop: a message gets at least the receives its budget can take.
    const { maxReceiveCount } = queue.Properties.RedrivePolicy;
    expect(queue.Properties.RedrivePolicy.deadLetterTargetArn).toEqual({ 'Fn::GetAtt': [dlqId, 'Arn'] });
    expect(maxReceiveCount).toBeGreaterThanOrEqual(receivesWithinBudget(24 * 3600_000));
    expect(consumerEnv.OUTBOX_MAX_RECEIVE_COUNT).toBe(String(maxReceiveCount));
    // Waits of 1 s doubling (capped at 12 h) over 24 h are 18 receives; 5, the old count, ran out after 31 s.
    expect(receivesWithinBudget(24 * 3600_000)).toBeGreaterThanOrEqual(18);
    expect(queue.Properties.MessageRetentionPeriod).toBeGreaterThan(24 * 3600);
    expect(dlq.Properties.MessageRetentionPeriod).toBe(Duration.days(14).toSeconds());
    expect(
      actionsOn(statementsOfRole(template, logicalId(stack.endpoint.consumerFunction!.role!)), { 'Fn::GetAtt': [dlqId, 'Arn'] }),
    ).toContain('sqs:SendMessage');
  });

  it('sizes the redrive count and the retention from an operator-set budget, and refuses a count that would run out first', () => {
    const scope = new Stack(new App(), 'Budget');
    const week = new OutboxQueue(scope, 'Week', { consumerTimeout: Duration.seconds(60), deliveryBudget: Duration.days(7) });
    expect(week.maxReceiveCount).toBe(receivesWithinBudget(7 * 24 * 3600_000));
    expect(week.maxReceiveCount).toBeGreaterThan(receivesWithinBudget(24 * 3600_000));
    expect((week.queue.node.defaultChild as CfnQueue).messageRetentionPeriod).toBe(Duration.days(8).toSeconds());
    expect(() => new OutboxQueue(scope, 'TooFew', { consumerTimeout: Duration.seconds(60), maxReceiveCount: 5 })).toThrow(
      /maxReceiveCount must be an integer from/,
    );
    expect(() => new OutboxQueue(scope, 'TooLong', { consumerTimeout: Duration.seconds(60), deliveryBudget: Duration.days(30) })).toThrow(
      /deliveryBudget/,
    );
  });

  it('under a customer managed key, lets a sender use the key as SQS asks of a producer, and send nothing more', () => {
    const scope = new Stack(new App({ builtinCloudFormationValidation: false }), 'QueueKey');
    const key = new kms.Key(scope, 'Key');
    const keyed = new OutboxQueue(scope, 'Keyed', { consumerTimeout: Duration.seconds(60), encryptionKey: key });
    const role = new iam.Role(scope, 'Sender', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    keyed.grantSend(role);
    keyed.grantSendToDeadLetterQueue(role);
    const sent = Template.fromStack(scope);
    const statements = statementsOfRole(sent, scope.getLogicalId(role.node.defaultChild as iam.CfnRole));
    expect(actionsOn(statements, { 'Fn::GetAtt': [scope.getLogicalId(keyed.queue.node.defaultChild as CfnQueue), 'Arn'] })).toEqual([
      'sqs:SendMessage',
    ]);
    expect(
      actionsOn(statements, { 'Fn::GetAtt': [scope.getLogicalId(keyed.deadLetterQueue.node.defaultChild as CfnQueue), 'Arn'] }),
    ).toEqual(['sqs:SendMessage']);
    expect([...new Set(actionsOn(statements, { 'Fn::GetAtt': [scope.getLogicalId(key.node.defaultChild as kms.CfnKey), 'Arn'] }))]).toEqual(
      ['kms:Decrypt', 'kms:GenerateDataKey'],
    );
  });

  it('keeps a message invisible for at least six consumer timeouts', () => {
    expect(queue.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * fnProps(functionIds.consumer).Timeout);
  });

  it('refuses a visibility timeout below six consumer timeouts, and an unbounded receive count', () => {
    const scope = new Stack(new App(), 'QueueRules');
    expect(
      () => new OutboxQueue(scope, 'Short', { consumerTimeout: Duration.seconds(60), visibilityTimeout: Duration.seconds(300) }),
    ).toThrow(/6 x the consumer timeout/);
    expect(() => new OutboxQueue(scope, 'Unbounded', { consumerTimeout: Duration.seconds(10), maxReceiveCount: 1001 })).toThrow(
      /maxReceiveCount/,
    );
  });

  it('is encrypted and refuses requests without TLS (both queues)', () => {
    for (const [id, q] of ofType('AWS::SQS::Queue')) {
      expect(q.Properties.SqsManagedSseEnabled).toBe(true);
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: id }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    }
  });
});

describe('the functions', () => {
  it('run Node.js 22 on arm64 from the bundled ESM handler, each with its own log group that expires', () => {
    const functions = ofType('AWS::Lambda::Function');
    expect(functions).toHaveLength(4);
    for (const [, fn] of functions) {
      expect(fn.Properties.Runtime).toBe('nodejs22.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      expect(fn.Properties.Handler).toBe('index.handler');
      const logGroupId = fn.Properties.LoggingConfig.LogGroup.Ref;
      expect(resources[logGroupId]!.Properties.RetentionInDays).toBe(30);
    }
  });

  it('share one Powertools service name, so every metric carries the dimension the alarms read', () => {
    for (const id of Object.values(functionIds)) {
      expect(env(id)).toMatchObject({
        POWERTOOLS_SERVICE_NAME: 'idempotent-mcp',
        POWERTOOLS_METRICS_NAMESPACE: 'IdempotentMcp',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        TABLE_NAME: { Ref: tableId },
      });
    }
  });

  it('give the reconciler RECONCILE_MAX_ATTEMPTS: 8 by default, the context key reconcileMaxAttempts when set', () => {
    expect(env(functionIds.reconciler).RECONCILE_MAX_ATTEMPTS).toBe('8');
    const cautious = synthStack({ reconcileMaxAttempts: '3' });
    const vars =
      cautious.template.toJSON().Resources[logicalId(cautious.stack.endpoint.reconcilerFunction)].Properties.Environment.Variables;
    expect(vars.RECONCILE_MAX_ATTEMPTS).toBe('3');
  });

  it('give the MCP function 29 s, of which the engine keeps its completion margin', () => {
    expect(fnProps(functionIds.mcp).Timeout).toBe(29);
    // The consumer's lease covers a verification and a delivery at the downstream timeout, plus a settle margin.
    const downstreamMs = Number(env(functionIds.consumer).DOWNSTREAM_TIMEOUT_MS);
    expect(fnProps(functionIds.consumer).Timeout * 1000).toBeGreaterThan(2 * downstreamMs + 1000);
    // A reconciler run ends before the next one starts.
    expect(fnProps(functionIds.reconciler).Timeout).toBeLessThan(60);
  });

  it("configure the MCP function for the stack's Cognito issuer, with the secret by ARN only", () => {
    const pool = logicalId(stack.endpoint.userPool!);
    expect(env(functionIds.mcp)).toMatchObject({
      AUTH_MODE: 'oidc',
      AUTH_ISSUER: { 'Fn::GetAtt': [pool, 'ProviderURL'] },
      AUTH_JWKS_URL: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [pool, 'ProviderURL'] }, '/.well-known/jwks.json']] },
      AUTH_TENANT_CLAIM: 'client_id',
      // The scope the stack's app client is granted: a token of this pool without it gets 403.
      AUTH_REQUIRED_SCOPES: 'idempotent-mcp/tools',
      OPERATION_ID_SECRET_ARN: { Ref: logicalId(partsOf(stack.endpoint).mcp.operationIdSecret as never) },
      // `unknown` answers suggest retrying after about one reconciler period.
      RECONCILE_INTERVAL_MS: '60000',
    });
    // Cognito client-credentials tokens carry no aud; the secret's value never sits in the template.
    expect(env(functionIds.mcp)).not.toHaveProperty('AUTH_AUDIENCE');
    expect(env(functionIds.mcp)).not.toHaveProperty('OPERATION_ID_SECRET');
  });

  it('works in every region: no layer and no region map decide whether a function deploys', () => {
    // The operation-id key is read with the SDK's Secrets Manager client in the bundle, not through a layer whose ARN
    // CDK looks up in a partial map of regions (Fn::FindInMap on AWS::Region).
    for (const id of Object.values(functionIds)) expect(fnProps(id).Layers, id).toBeUndefined();
    expect(template.toJSON().Mappings ?? {}).toEqual({});
    expect(JSON.stringify(template.toJSON().Resources)).not.toContain('Fn::FindInMap');
    expect(Object.keys(env(functionIds.mcp)).filter((name) => name.startsWith('PARAMETERS_SECRETS_'))).toEqual([]);
  });
});

describe('least-privilege IAM', () => {
  const statements = Object.fromEntries(Object.entries(roleIds).map(([name, id]) => [name, statementsOfRole(template, id)])) as Record<
    keyof typeof roleIds,
    Statement[]
  >;
  const dynamo = (actions: string[]) => actions.map((a) => `dynamodb:${a}`).sort();

  it('grants each function exactly its own table actions on the table, and Query only on the attention index', () => {
    expect(actionsOn(statements.mcp, tableArn)).toEqual(dynamo(MCP_TABLE_ACTIONS));
    expect(actionsOn(statements.relay, tableArn)).toEqual(dynamo(RELAY_TABLE_ACTIONS));
    expect(actionsOn(statements.consumer, tableArn)).toEqual(dynamo(CONSUMER_TABLE_ACTIONS));
    expect(actionsOn(statements.reconciler, tableArn)).toEqual(dynamo(RECONCILER_TABLE_ACTIONS));
    const index = { 'Fn::Join': ['', [tableArn, `/index/${TableSchema.attentionIndex.name}`]] };
    expect(actionsOn(statements.reconciler, index)).toEqual(['dynamodb:Query']);
    for (const name of ['mcp', 'relay', 'consumer'] as const)
      expect(serviceActions(statements[name], 'dynamodb')).not.toContain('dynamodb:Query');
  });

  it('never grants Scan, a wildcard action, or a wildcard resource (but ListStreams, which has none)', () => {
    for (const [, policy] of [...ofType('AWS::IAM::Policy'), ...ofType('AWS::IAM::Role')]) {
      const docs =
        policy.Type === 'AWS::IAM::Role'
          ? (policy.Properties.Policies ?? []).map((p: any) => p.PolicyDocument)
          : [policy.Properties.PolicyDocument];
      for (const doc of docs) {
        for (const statement of doc.Statement as Statement[]) {
          for (const action of actionsOf(statement)) {
            expect(action).not.toMatch(/^dynamodb:(Scan|\*)$/);
            expect(action.endsWith(':*') || action === '*').toBe(false);
          }
          if (resourcesOf(statement).includes('*')) expect(actionsOf(statement)).toEqual(['dynamodb:ListStreams']);
        }
      }
    }
  });

  it('gives the queue to the relay and reconciler to send, to the consumer to receive, and not to the MCP function', () => {
    // SendMessage alone (SendMessageBatch is authorized by it): each function is given the queue's URL, so no
    // GetQueueUrl, and none reads the queue's attributes.
    expect(actionsOn(statements.relay, queueArn)).toEqual(['sqs:SendMessage']);
    expect(actionsOn(statements.reconciler, queueArn)).toEqual(['sqs:SendMessage']);
    const dlqArn = { 'Fn::GetAtt': [logicalId(stack.endpoint.deadLetterQueue!), 'Arn'] };
    expect(actionsOn(statements.consumer, dlqArn)).toEqual(['sqs:SendMessage']);
    for (const name of ['relay', 'reconciler', 'mcp'] as const) expect(actionsOn(statements[name], dlqArn)).toEqual([]);
    expect(actionsOn(statements.consumer, queueArn)).toEqual(
      expect.arrayContaining(['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility']),
    );
    expect(actionsOn(statements.consumer, queueArn)).not.toContain('sqs:SendMessage');
    expect(serviceActions(statements.mcp, 'sqs')).toEqual([]);
  });

  it('lets only the relay read the table stream, and only the MCP function read the operation-id secret', () => {
    const stream = { 'Fn::GetAtt': [tableId, 'StreamArn'] };
    expect(actionsOn(statements.relay, stream)).toEqual(['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator']);
    for (const name of ['mcp', 'consumer', 'reconciler'] as const) expect(actionsOn(statements[name], stream)).toEqual([]);
    const secret = { Ref: logicalId(partsOf(stack.endpoint).mcp.operationIdSecret as never) };
    expect(actionsOn(statements.mcp, secret)).toEqual(['secretsmanager:GetSecretValue']);
    for (const name of ['relay', 'consumer', 'reconciler'] as const) expect(serviceActions(statements[name], 'secretsmanager')).toEqual([]);
  });

  it('uses no AWS managed policy: each role writes only to its own log group', () => {
    for (const [name, id] of Object.entries(roleIds)) {
      expect(resources[id]!.Properties.ManagedPolicyArns).toBeUndefined();
      const logGroup = fnProps(functionIds[name as keyof typeof functionIds]).LoggingConfig.LogGroup.Ref;
      expect(actionsOn(statements[name as keyof typeof statements], { 'Fn::GetAtt': [logGroup, 'Arn'] })).toEqual([
        'logs:CreateLogStream',
        'logs:PutLogEvents',
      ]);
    }
  });

  it('with SES email, lets only the consumer send, and only as the configured sender', () => {
    const ses = synthStack({ emailFrom: 'agent@mail.example.com' });
    const consumer = statementsOfRole(ses.template, logicalId(ses.stack.endpoint.consumerFunction!.role!));
    const send = consumer.find((s) => actionsOf(s).includes('ses:SendEmail'))!;
    expect(actionsOf(send)).toEqual(['ses:SendEmail']);
    expect(send.Condition).toEqual({ StringEquals: { 'ses:FromAddress': 'agent@mail.example.com' } });
    for (const role of [ses.stack.endpoint.mcpFunction, ses.stack.endpoint.relayFunction!, ses.stack.endpoint.reconcilerFunction].map(
      (fn) => logicalId(fn.role!),
    )) {
      expect(serviceActions(statementsOfRole(ses.template, role), 'ses')).toEqual([]);
    }
    expect(ses.template.toJSON().Resources[logicalId(ses.stack.endpoint.consumerFunction!)].Properties.Environment.Variables).toMatchObject(
      {
        EMAIL_MODE: 'ses',
        EMAIL_FROM: 'agent@mail.example.com',
      },
    );
  });
});

describe('event sources and the schedule', () => {
  it('the relay reads the table stream from its start, only outbox event INSERTs, reporting failures per item', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [tableId, 'StreamArn'] },
      FunctionName: { Ref: functionIds.relay },
      StartingPosition: 'TRIM_HORIZON',
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: Match.anyValue(),
    });
    const mapping = ofType('AWS::Lambda::EventSourceMapping').find(([, m]) => m.Properties.FunctionName.Ref === functionIds.relay)![1];
    expect(mapping.Properties.MaximumRetryAttempts).toBeGreaterThan(0);
    const pattern = mapping.Properties.FilterCriteria.Filters.map((f: { Pattern: string }) => JSON.parse(f.Pattern));
    // INSERT only: the relay's own send bookkeeping (a MODIFY) must not wake it again.
    expect(pattern).toEqual([{ eventName: ['INSERT'], dynamodb: { Keys: { pk: { S: [{ prefix: 'OUTBOX#' }] }, sk: { S: ['EVENT'] } } } }]);
  });

  it('the consumer reads the outbox queue, reporting failures per message', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: queueArn,
      FunctionName: { Ref: functionIds.consumer },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('the reconciler runs every minute', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [functionIds.reconciler, 'Arn'] } })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      FunctionName: { 'Fn::GetAtt': [functionIds.reconciler, 'Arn'] },
      Principal: 'events.amazonaws.com',
    });
  });

  it("the reconciler's backoff starts at its own period: RECONCILE_INTERVAL_MS is the schedule's rate, as the MCP function says", () => {
    // Without it the reconciler backs off from the local default (seconds) while it runs once a minute, and a
    // downstream outage of well under an hour parks UNKNOWN records for review.
    expect(env(functionIds.reconciler).RECONCILE_INTERVAL_MS).toBe('60000');
    expect(env(functionIds.mcp).RECONCILE_INTERVAL_MS).toBe('60000');
    const slower = new IdempotentMcpStack(
      new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false }),
      'Slower',
      { reconcilePeriod: Duration.minutes(5) },
    );
    const slowerTemplate = Template.fromStack(slower);
    const slowerResources = slowerTemplate.toJSON().Resources;
    const slowerEnv = (fn: { node: { defaultChild?: unknown } }) => slowerResources[logicalId(fn)].Properties.Environment.Variables;
    expect(slowerEnv(slower.endpoint.reconcilerFunction).RECONCILE_INTERVAL_MS).toBe('300000');
    expect(slowerEnv(slower.endpoint.mcpFunction).RECONCILE_INTERVAL_MS).toBe('300000');
    slowerTemplate.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(5 minutes)' });
    // A second synth of the whole stack: slow on a busy machine.
  }, 120_000);
});

describe('the configuration contract', () => {
  it('every variable a construct sets is declared once in lambdas/config.ts, and reads back as what was set', () => {
    const declared = new Map(Object.values(EnvVars).map((v) => [v.name, v]));
    for (const [, fn] of ofType('AWS::Lambda::Function')) {
      for (const [name, value] of Object.entries(fn.Properties.Environment?.Variables ?? {})) {
        expect(declared.has(name), `${name} is not declared in EnvVars`).toBe(true);
        if (typeof value === 'string') expect(() => declared.get(name)!.parse(value), name).not.toThrow();
      }
    }
  });
});

describe('the MCP URL and auth', () => {
  it('is a public Function URL (the function verifies the bearer JWT; SigV4 would need the same header)', () => {
    template.hasResourceProperties('AWS::Lambda::Url', {
      AuthType: 'NONE',
      TargetFunctionArn: { 'Fn::GetAtt': [functionIds.mcp, 'Arn'] },
    });
  });

  it('creates a Cognito pool with a client-credentials client for the tools scope, and no user sign-in', () => {
    template.hasResourceProperties('AWS::Cognito::UserPoolClient', {
      GenerateSecret: true,
      AllowedOAuthFlows: ['client_credentials'],
      AllowedOAuthFlowsUserPoolClient: true,
      ExplicitAuthFlows: ['ALLOW_REFRESH_TOKEN_AUTH'],
    });
    template.hasResourceProperties('AWS::Cognito::UserPoolResourceServer', {
      Identifier: 'idempotent-mcp',
      Scopes: [{ ScopeName: 'tools', ScopeDescription: Match.anyValue() }],
    });
    template.hasResourceProperties('AWS::Cognito::UserPool', { AdminCreateUserConfig: { AllowAdminCreateUserOnly: true } });
    template.resourceCountIs('AWS::Cognito::UserPoolDomain', 1);
  });

  it('outputs the MCP URL, token endpoint and client id, and the command for the secret, never the secret', () => {
    const outputs = template.toJSON().Outputs;
    expect(Object.keys(outputs)).toEqual(
      expect.arrayContaining(['McpUrl', 'TokenEndpoint', 'TokenScope', 'ClientId', 'ClientSecretCommand']),
    );
    expect(outputs.McpUrl.Value).toEqual({
      'Fn::Join': ['', [{ 'Fn::GetAtt': [logicalId(partsOf(stack.endpoint).mcp.url as never), 'FunctionUrl'] }, 'mcp']],
    });
    expect(JSON.stringify(template.toJSON())).not.toContain('ClientSecret"]');
  });

  it('outputs the table and both queues, which the review tool reads with --stack', () => {
    const outputs = template.toJSON().Outputs;
    expect(outputs[StackOutput.table].Value).toEqual({ Ref: tableId });
    expect(outputs[StackOutput.queue].Value).toEqual({ Ref: logicalId(stack.endpoint.queue!) });
    expect(outputs[StackOutput.deadLetterQueue].Value).toEqual({ Ref: logicalId(stack.endpoint.deadLetterQueue!) });
  });

  it('verifies an existing OIDC issuer instead, from context, and then creates no Cognito resources', () => {
    const oidc = synthStack({
      authIssuer: 'https://login.example.com/',
      authAudience: 'https://mcp.example.com',
      authTenantClaim: 'org_id',
    });
    oidc.template.resourceCountIs('AWS::Cognito::UserPool', 0);
    const vars = oidc.template.toJSON().Resources[logicalId(oidc.stack.endpoint.mcpFunction)].Properties.Environment.Variables;
    expect(vars).toMatchObject({
      AUTH_MODE: 'oidc',
      AUTH_ISSUER: 'https://login.example.com/',
      AUTH_AUDIENCE: 'https://mcp.example.com',
      AUTH_JWKS_URL: 'https://login.example.com/.well-known/jwks.json',
      AUTH_TENANT_CLAIM: 'org_id',
    });
    expect(Object.keys(oidc.template.toJSON().Outputs)).not.toContain('TokenEndpoint');
    // No scope asked for: none required.
    expect(vars.AUTH_REQUIRED_SCOPES).toBe('');
  });

  it('reads the tenant from the same claim the functions default to when authTenantClaim is not set', () => {
    const oidc = synthStack({ authIssuer: 'https://login.example.com/', authAudience: 'https://mcp.example.com' });
    const vars = oidc.template.toJSON().Resources[logicalId(oidc.stack.endpoint.mcpFunction)].Properties.Environment.Variables;
    // One default, documented once (docs/configuration.md): the stack and AUTH_TENANT_CLAIM unset agree.
    expect(vars.AUTH_TENANT_CLAIM).toBe(readEnv({}, EnvVars.authTenantClaim));
  });

  it('an external issuer without an audience fails the synth, naming the setting, unless a reason is given', () => {
    expect(() => synthStack({ authIssuer: 'https://login.example.com/' })).toThrow(
      /authAudience.*required.*authAudienceNotRequiredReason/s,
    );
    const optedOut = synthStack({
      authIssuer: 'https://login.example.com/',
      authAudienceNotRequiredReason: 'this issuer serves this API only',
    });
    const vars = optedOut.template.toJSON().Resources[logicalId(optedOut.stack.endpoint.mcpFunction)].Properties.Environment.Variables;
    expect(vars).not.toHaveProperty('AUTH_AUDIENCE');
  });

  it('tools opted out of server-side confirmation for 2025-era clients reach the function from context', () => {
    const optedOut = synthStack({ confirmationOptOut: 'request_payment' });
    const vars = optedOut.template.toJSON().Resources[logicalId(optedOut.stack.endpoint.mcpFunction)].Properties.Environment.Variables;
    expect(vars.CONFIRMATION_OPT_OUT_TOOLS).toBe('request_payment');
    expect(env(functionIds.mcp)).not.toHaveProperty('CONFIRMATION_OPT_OUT_TOOLS');
  });

  it('an external issuer with required scopes passes them to the function', () => {
    const scoped = synthStack({
      authIssuer: 'https://login.example.com/',
      authAudience: 'api://mcp',
      authRequiredScopes: 'mcp.tools  mcp.write',
    });
    const vars = scoped.template.toJSON().Resources[logicalId(scoped.stack.endpoint.mcpFunction)].Properties.Environment.Variables;
    expect(vars.AUTH_REQUIRED_SCOPES).toBe('mcp.tools mcp.write');
  });
});

describe('alarms and dashboard', () => {
  const alarms = ofType('AWS::CloudWatch::Alarm').map(([, a]) => a.Properties);
  const alarmOn = (metricName: string) => alarms.filter((a) => a.MetricName === metricName);

  it('alarm on the dead-letter queue depth', () => {
    expect(alarmOn('ApproximateNumberOfMessagesVisible')).toEqual([
      expect.objectContaining({
        Namespace: 'AWS/SQS',
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(stack.endpoint.deadLetterQueue!), 'QueueName'] } }],
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      }),
    ]);
  });

  it('alarm on the reconciler gauges, by the names and dimension the functions emit', () => {
    const dims = [{ Name: 'service', Value: 'idempotent-mcp' }];
    expect(alarmOn(MetricName.NeedsReview)).toEqual([
      expect.objectContaining({ Namespace: 'IdempotentMcp', Dimensions: dims, Threshold: 1 }),
    ]);
    // A silent reconciler is as bad as an old UNKNOWN: missing data breaches.
    expect(alarmOn(MetricName.OldestUnknownAgeSeconds)).toEqual([
      expect.objectContaining({ Namespace: 'IdempotentMcp', Dimensions: dims, TreatMissingData: 'breaching', Statistic: 'Maximum' }),
    ]);
  });

  it('alarm on errors and throttles of every function', () => {
    for (const metric of ['Errors', 'Throttles']) {
      const watched = alarmOn(metric)
        .map((a) => a.Dimensions[0].Value.Ref)
        .sort();
      expect(watched).toEqual(Object.values(functionIds).sort());
    }
    expect(alarms).toHaveLength(3 + 2 * 4);
  });

  it('send alarms and recoveries to a TLS-only topic when an address is given', () => {
    const withEmail = synthStack({ alarmEmail: 'ops@example.com' });
    const topicId = Object.keys(withEmail.template.findResources('AWS::SNS::Topic'))[0]!;
    withEmail.template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    withEmail.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
      },
    });
    for (const alarm of Object.values(withEmail.template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
      expect(alarm.Properties.OKActions).toEqual([{ Ref: topicId }]);
    }
    expect(alarms.every((a) => a.AlarmActions === undefined)).toBe(true);
  });

  it('build a dashboard with the alarm metrics', () => {
    const [, dashboard] = ofType('AWS::CloudWatch::Dashboard')[0]!;
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    for (const name of [
      MetricName.NeedsReview,
      MetricName.OldestUnknownAgeSeconds,
      'ApproximateNumberOfMessagesVisible',
      'Errors',
      'Throttles',
    ]) {
      expect(body).toContain(name);
    }
  });
});

describe('the sandbox downstreams', () => {
  it('are not deployed by default', () => {
    expect(base.stack.sandbox).toBeUndefined();
    expect(env(functionIds.mcp)).not.toHaveProperty('PAYMENTS_URL');
  });

  it('with the flag, get their own function, URL and throw-away table, and the tools point at them', () => {
    const demo = synthStack({ sandbox: 'true' });
    const sandbox = demo.stack.sandbox!;
    const json = demo.template.toJSON().Resources;
    expect(json[logicalId(sandbox.table)].DeletionPolicy).toBe('Delete');
    const url = { 'Fn::GetAtt': [logicalId(sandbox.url as never), 'FunctionUrl'] };
    const vars = json[logicalId(demo.stack.endpoint.mcpFunction)].Properties.Environment.Variables;
    expect(vars.PAYMENTS_URL).toEqual({ 'Fn::Join': ['', [url, 'sandbox/payments']] });
    expect(json[logicalId(demo.stack.endpoint.consumerFunction!)].Properties.Environment.Variables).toMatchObject({
      EMAIL_MODE: 'sandbox',
      MAILBOX_URL: { 'Fn::Join': ['', [url, 'sandbox/mailbox']] },
      TICKETS_URL: { 'Fn::Join': ['', [url, 'sandbox/tickets']] },
    });
    // Its fault holds outlast the callers' downstream timeout.
    expect(json[logicalId(sandbox.handler.function)].Properties.Environment.Variables).toMatchObject({
      SANDBOX_TABLE_NAME: { Ref: logicalId(sandbox.table) },
      DOWNSTREAM_TIMEOUT_MS: vars.DOWNSTREAM_TIMEOUT_MS,
    });
    // The sandbox role touches only the sandbox table.
    const sandboxStatements = statementsOfRole(demo.template, logicalId(sandbox.handler.role));
    expect(actionsOn(sandboxStatements, { 'Fn::GetAtt': [logicalId(demo.stack.endpoint.table), 'Arn'] })).toEqual([]);
  });
});

describe('the demo tools a deployment serves: none whose downstream is not configured', () => {
  /** The MCP function's environment from its template: deploy-time values (the sandbox's URL) as URLs of that shape. */
  const deployedEnv = (synth: ReturnType<typeof synthStack>): Record<string, string> =>
    Object.fromEntries(
      Object.entries(
        synth.template.toJSON().Resources[logicalId(synth.stack.endpoint.mcpFunction)].Properties.Environment.Variables as Record<
          string,
          unknown
        >,
      ).map(([name, value]) => [name, typeof value === 'string' ? value : `https://deployed.example.com/${name.toLowerCase()}`]),
    );
  /** The tool names the stack's tools module exports when loaded with this environment, as at the function's cold start. */
  async function servedWith(synth: ReturnType<typeof synthStack>, env: Record<string, string>): Promise<string[]> {
    for (const name of ['PAYMENTS_URL', 'TICKETS_URL', 'MAILBOX_URL', 'EMAIL_MODE', 'EMAIL_FROM']) vi.stubEnv(name, undefined);
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    try {
      // A fresh instance of the module each time (the query makes it another module to vitest), evaluated with this
      // environment; the modules it imports read none at import.
      const module = (await import(`${synth.stack.endpoint.toolsModule}?cold-start=${++coldStarts}`)) as { tools: Array<{ name: string }> };
      return module.tools.map((tool) => tool.name).sort();
    } finally {
      vi.unstubAllEnvs();
    }
  }
  let coldStarts = 0;
  const ORDERS = ['create_order', 'get_order'];

  it('serves only the order tools by default (no payments provider, ticket system or sender configured)', async () => {
    expect(await servedWith(base, deployedEnv(base))).toEqual(ORDERS);
  });

  it('turns each tool on with its own setting: paymentsUrl request_payment, ticketsUrl create_ticket, emailFrom send_email', async () => {
    const all = synthStack({
      paymentsUrl: 'https://payments.example.com',
      ticketsUrl: 'https://tickets.example.com',
      emailFrom: 'agent@mail.example.com',
    });
    const env = deployedEnv(all);
    expect(await servedWith(all, env)).toEqual([...ORDERS, 'create_ticket', 'request_payment', 'send_email'].sort());
    const without = (name: string) => Object.fromEntries(Object.entries(env).filter(([key]) => key !== name));
    expect(await servedWith(all, without('PAYMENTS_URL'))).not.toContain('request_payment');
    expect(await servedWith(all, without('TICKETS_URL'))).not.toContain('create_ticket');
    expect(await servedWith(all, without('EMAIL_FROM'))).not.toContain('send_email');
  }, 120_000);

  it('serves all five with the sandbox, and refuses a sandbox mailbox without its URL in one sentence', async () => {
    const demo = synthStack({ sandbox: 'true' });
    expect(await servedWith(demo, deployedEnv(demo))).toEqual([...ORDERS, 'create_ticket', 'request_payment', 'send_email'].sort());
    expect(() => synthStack({ emailMode: 'sandbox' })).toThrow(/^emailMode "sandbox" needs mailboxUrl/);
  }, 120_000);
});

describe('context settings', () => {
  const read = (context: Record<string, unknown>) => settingsFromContext(context);

  it('default to a retained table, Cognito auth, no sandbox, and nag on', () => {
    const settings = read({});
    expect(settings.stackName).toBe('IdempotentMcp');
    expect(settings.nag).toBe(true);
    expect(settings.props.sandbox).toBe(false);
    expect(settings.props.auth?.external).toBeUndefined();
    expect(settings.props.tableRemovalPolicy).toBe('retain');
  });

  it('refuse values they cannot mean, naming the key', () => {
    expect(() => read({ sandbox: 'yes' })).toThrow(/"sandbox" must be true or false/);
    expect(() => read({ emailMode: 'smtp' })).toThrow(/"emailMode" must be one of ses, sandbox/);
    expect(() => read({ urlAuthType: 'AWS_IAM' })).toThrow(/"urlAuthType" is no longer supported/);
    expect(() => read({ logRetentionDays: '45' })).toThrow(/logRetentionDays/);
    expect(() => read({ reconcileMaxAttempts: '0' })).toThrow(/reconcileMaxAttempts/);
    expect(() => synthStack({ emailMode: 'ses' })).toThrow(/needs emailFrom/);
  });
});
