import { Annotations, CfnOutput, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as cognito from 'aws-cdk-lib/aws-cognito';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { EnvVars, isTableKeyPrefix } from '../lambdas/config';
import { APPROVAL_CALLBACK_PATH, APPROVALS_PATH } from '../lambdas/core/endpoint-paths';
import { ApprovalPageApi } from './constructs/approval-page';
import { Auth } from './constructs/auth';
import { IdempotencyTable } from './constructs/idempotency-store';
import { McpFunction } from './constructs/mcp-function';
import { Monitoring } from './constructs/monitoring';
import { DEFAULT_CONSUMER_TIMEOUT, OutboxConsumerFunction } from './constructs/outbox-consumer';
import { OutboxQueue } from './constructs/outbox-queue';
import { OutboxRelayFunction } from './constructs/outbox-relay';
import { ReconcilerFunction } from './constructs/reconciler';
import type { CommonFunctionProps } from './constructs/service-function';
import { StackOutput } from './stack-outputs';
import { checkModuleExports } from './tools-check';
import { checkToolsModule, deliveriesFunctionEntry, toolsFunctionEntry } from './tools-entry';
import { checkEnvironment, checkSettings, servesApprovalPage } from './endpoint-checks';
import type { FUNCTION_NAMES, IdempotentMcpEndpointProps } from './endpoint-props';

// The props' public names, where exports/cdk.ts finds them with the construct.
export type { ApprovalPageSettings, EndpointSettings, IdempotentMcpEndpointProps } from './endpoint-props';

/**
 * An idempotent MCP endpoint serving your own tools: the table, the MCP function and its URL, the reconciler and the
 * alarms; with a deliveries module also the outbox (the table's stream, relay, queue, dead-letter queue, consumer).
 * A misconfigured prop, or a tools module that does not export its tools, fails the synth with the prop's name.
 * @public
 */
export class IdempotentMcpEndpoint extends Construct {
  /** The tools module the MCP function and the reconciler bundle (absolute path). */
  readonly toolsModule: string;
  /** The deliveries module the consumer bundles (absolute path); only with `deliveries`. */
  readonly deliveriesModule?: string;
  /** The table of records, business items and outbox events (the new one, or `existingTable`). */
  readonly table: dynamodb.ITable;
  /** The MCP function (its `grantPrincipal` is its role): grant it what your tools call. */
  readonly mcpFunction: lambda.Function;
  /** The reconciler (its `grantPrincipal` is its role): grant it what your reconcile hooks call. */
  readonly reconcilerFunction: lambda.Function;
  /** The outbox consumer, only with `deliveries`: grant it what your deliveries call. */
  readonly consumerFunction?: lambda.Function;
  /** The outbox relay (the table's stream to the queue), only with `deliveries`. */
  readonly relayFunction?: lambda.Function;
  /** The outbox queue the relay sends to and the consumer reads; only with `deliveries`. */
  readonly queue?: sqs.IQueue;
  /** Where the queue moves an event its consumer failed to deliver (the `idempotent-mcp ops` redrive); only with `deliveries`. */
  readonly deadLetterQueue?: sqs.IQueue;
  /** The stack's Cognito user pool (one app client per tenant, and the people who approve); none with `auth.external`. */
  readonly userPool?: cognito.IUserPool;
  /** Where approval links point (`<base>/approvals`); only with the page. */
  readonly approvalPageUrl?: string;
  /** The redirect URI of the page's sign-in client (register it at an external issuer); only with the page. */
  readonly approvalCallbackUrl?: string;
  // The parts behind them: the constructs of lib/constructs, the toolkit's own.
  private readonly store: IdempotencyTable;
  private readonly auth: Auth;
  private readonly mcp: McpFunction;

  constructor(scope: Construct, id: string, props: IdempotentMcpEndpointProps) {
    super(scope, id);
    const tools = checkToolsModule('IdempotentMcpEndpoint: tools', props?.tools);
    const deliveries =
      props.deliveries === undefined ? undefined : checkToolsModule('IdempotentMcpEndpoint: deliveries', props.deliveries, 'deliveries');
    const hasOutbox = deliveries !== undefined;
    this.toolsModule = tools;
    this.deliveriesModule = deliveries;
    checkEnvironment(props.environment ?? {});
    checkSettings(props, hasOutbox);
    const keyPrefix = props.tableKeyPrefix || undefined;
    if (keyPrefix !== undefined && (Token.isUnresolved(keyPrefix) || !isTableKeyPrefix(keyPrefix)))
      throw new Error(`IdempotentMcpEndpoint: tableKeyPrefix may contain only letters, digits and _ . : - (got ${keyPrefix.slice(0, 80)})`);
    // Values known only once deployed (tokens) are left out: the modules load here as far as the synth can tell.
    const knownEnvironment = Object.fromEntries(Object.entries(props.environment ?? {}).filter(([, value]) => !Token.isUnresolved(value)));
    const { unchecked } = checkModuleExports({ prop: 'IdempotentMcpEndpoint', tools, deliveries, environment: knownEnvironment });
    if (unchecked) Annotations.of(this).addWarningV2('idempotent-mcp:modules-unchecked', unchecked);

    const fn = (name: (typeof FUNCTION_NAMES)[number]): CommonFunctionProps => ({
      powertools: props.powertools,
      logRetention: props.logRetention,
      vpc: props.vpc,
      vpcSubnets: props.vpcSubnets,
      securityGroups: props.securityGroups,
      ...props.functions?.[name],
    });
    const tableRemovalPolicy = props.tableRemovalPolicy ?? RemovalPolicy.RETAIN;
    const encryptionKey = props.customerManagedKey
      ? new kms.Key(this, 'TableKey', {
          description: 'Encrypts the idempotency table and its stream',
          enableKeyRotation: true,
          // The key must outlive the retained table, or its data becomes unreadable.
          removalPolicy: tableRemovalPolicy,
        })
      : undefined;
    this.store = props.existingTable
      ? new IdempotencyTable(this, 'Store', { existingTable: props.existingTable })
      : new IdempotencyTable(this, 'Store', { encryptionKey, removalPolicy: tableRemovalPolicy, stream: hasOutbox });
    this.table = this.store.table;
    // The page's address comes first and depends on nothing else: the sign-in client registers its callback, the
    // function is told the client, and only then do the page's routes reach the function (no cycle).
    let pageBase: string | undefined;
    let approvalPageApi: ApprovalPageApi | undefined;
    if (servesApprovalPage(props)) {
      if (props.publicBaseUrl) pageBase = props.publicBaseUrl.replace(/\/+$/, '');
      else {
        approvalPageApi = new ApprovalPageApi(this, 'ApprovalPage', { logRetention: props.logRetention });
        pageBase = approvalPageApi.baseUrl;
      }
      this.approvalPageUrl = `${pageBase}${APPROVALS_PATH}`;
      this.approvalCallbackUrl = `${pageBase}${APPROVAL_CALLBACK_PATH}`;
    }
    const cognitoPage = this.approvalCallbackUrl !== undefined && !props.auth?.external;
    this.auth = new Auth(this, 'Auth', {
      ...props.auth,
      approvalPage: cognitoPage ? { callbackUrl: this.approvalCallbackUrl! } : undefined,
    });
    this.userPool = this.auth.userPool;
    const signIn = props.approvalPage?.signIn ?? this.auth.approvalSignIn;
    this.mcp = new McpFunction(this, 'Mcp', {
      ...fn('mcp'),
      entry: toolsFunctionEntry('mcp', tools),
      store: this.store,
      auth: this.auth.verification,
      downstreamTimeout: props.downstreamTimeout,
      allowedOrigins: props.allowedOrigins,
      confirmationOptOut: props.confirmationOptOut,
      confirmationFormFallback: props.confirmationFormFallback,
      publicBaseUrl: props.publicBaseUrl,
      reconcilePeriod: props.reconcilePeriod,
      outbox: hasOutbox,
      approvalPage:
        pageBase !== undefined && signIn
          ? { signIn, baseUrl: approvalPageApi ? pageBase : undefined, linkLifetime: props.approvalPage?.linkLifetime }
          : undefined,
    });
    approvalPageApi?.serve(this.mcp.handler.function);
    let outbox: OutboxQueue | undefined;
    let relay: OutboxRelayFunction | undefined;
    let consumer: OutboxConsumerFunction | undefined;
    if (deliveries !== undefined) {
      const consumerTimeout = props.functions?.consumer?.timeout ?? DEFAULT_CONSUMER_TIMEOUT;
      outbox = new OutboxQueue(this, 'Outbox', { consumerTimeout });
      this.queue = outbox.queue;
      this.deadLetterQueue = outbox.deadLetterQueue;
      relay = new OutboxRelayFunction(this, 'Relay', { ...fn('relay'), store: this.store, queue: outbox, keyPrefix });
      consumer = new OutboxConsumerFunction(this, 'Consumer', {
        ...fn('consumer'),
        entry: deliveriesFunctionEntry(deliveries, tools),
        store: this.store,
        queue: outbox,
        downstreamTimeout: props.downstreamTimeout,
        timeout: consumerTimeout,
      });
    }
    const reconciler = new ReconcilerFunction(this, 'Reconciler', {
      ...fn('reconciler'),
      entry: toolsFunctionEntry('reconciler', tools),
      store: this.store,
      queue: outbox,
      downstreamTimeout: props.downstreamTimeout,
      period: props.reconcilePeriod,
      maxAttempts: props.reconcileMaxAttempts,
    });
    this.mcpFunction = this.mcp.handler.function;
    this.reconcilerFunction = reconciler.handler.function;
    this.relayFunction = relay?.handler.function;
    this.consumerFunction = consumer?.handler.function;
    const monitoring = new Monitoring(this, 'Monitoring', {
      functions: {
        Mcp: this.mcpFunction,
        ...(this.relayFunction ? { Relay: this.relayFunction } : {}),
        ...(this.consumerFunction ? { Consumer: this.consumerFunction } : {}),
        Reconciler: this.reconcilerFunction,
        ...props.monitoredFunctions,
      },
      deadLetterQueue: outbox?.deadLetterQueue,
      powertools: props.powertools,
      alarmTopic: props.alarmTopic,
      dashboard: props.dashboard,
    });

    for (const handler of [this.mcp.handler, reconciler.handler, ...(consumer ? [consumer.handler] : [])]) {
      if (keyPrefix !== undefined) handler.function.addEnvironment(EnvVars.tableKeyPrefix.name, keyPrefix);
      for (const [name, value] of Object.entries(props.environment ?? {})) handler.function.addEnvironment(name, value);
      for (const statement of props.grants ?? []) handler.role.addToPrincipalPolicy(statement);
    }
    if (props.outputs !== false) this.addOutputs(monitoring.dashboard?.dashboardName);
  }

  /** The stack outputs this endpoint adds (see `outputs`), by the names of StackOutput. */
  private addOutputs(dashboardName: string | undefined): void {
    const stack = Stack.of(this);
    const output = (id: string, value: string | undefined, description?: string) => {
      if (value === undefined) return;
      if (stack.node.tryFindChild(id))
        throw new Error(
          `IdempotentMcpEndpoint: the stack already has a construct named ${id} (another endpoint's outputs, or your own): set outputs: false on this endpoint, or rename yours`,
        );
      new CfnOutput(stack, id, { value, description });
    };
    const { auth } = this;
    output(StackOutput.mcpUrl, this.mcpUrl, 'The MCP endpoint (streamable HTTP): hand it to your agents');
    output(StackOutput.tokenEndpoint, auth.tokenEndpoint, 'OAuth 2.0 token endpoint (client credentials)');
    output(StackOutput.tokenScope, auth.scope, 'The scope to request');
    output(
      StackOutput.userPoolId,
      auth.userPool?.userPoolId,
      'The Cognito user pool: one app client per tenant, and the people who approve',
    );
    output(StackOutput.clientId, auth.client?.userPoolClientId, "The demo tenant's app client id (also its tenant id)");
    output(
      StackOutput.clientSecretCommand,
      auth.clientSecretCommand(),
      "Prints the demo client's secret (kept out of outputs and the template)",
    );
    output(StackOutput.approvalPageUrl, this.approvalPageUrl, 'Where approval links point (people approve payments here, signed in)');
    output(
      StackOutput.approvalCallbackUrl,
      this.approvalCallbackUrl,
      'The sign-in redirect URI of the page (register it with an external issuer)',
    );
    output(
      StackOutput.approvalClientId,
      auth.approvalClient?.userPoolClientId,
      "The approval page's app client for people (managed login)",
    );
    // `idempotent-mcp ops --stack <name>` reads these three.
    output(StackOutput.table, this.store.tableName);
    output(StackOutput.queue, this.queue?.queueUrl);
    output(StackOutput.deadLetterQueue, this.deadLetterQueue?.queueUrl);
    output(StackOutput.dashboard, dashboardName);
    // The deploy prints it: the functions run on Lambda's Node 22 whatever Node ran `cdk deploy` (README, Node.js).
    output(StackOutput.runtime, this.mcp.handler.function.runtime.name, 'The Lambda runtime every function of the endpoint runs on');
  }

  /** The MCP endpoint's URL (streamable HTTP), e.g. for a CfnOutput. */
  get mcpUrl(): string {
    return this.mcp.mcpUrl;
  }

  /**
   * Read the records, business items, review logs and outbox events one at a time (GetItem) and list what needs
   * attention (Query on the attention index): what `idempotent-mcp ops list` and `show` need. No Scan, no write.
   */
  grantReadRecords(grantee: iam.IGrantable): iam.Grant {
    return this.store.grantReadRecords(grantee);
  }

  /**
   * Everything `idempotent-mcp ops` does: read (as grantReadRecords), settle or re-check a record (its fenced
   * writes), and with an outbox redrive the dead-letter queue to the queue.
   */
  grantReview(grantee: iam.IGrantable): iam.Grant {
    let grant = this.grantReadRecords(grantee).combine(
      this.store.grantItems(grantee, ['PutItem', 'UpdateItem', 'DeleteItem', 'ConditionCheckItem']),
    );
    if (this.queue && this.deadLetterQueue) {
      grant = grant.combine(this.deadLetterQueue.grantConsumeMessages(grantee)).combine(this.queue.grantSendMessages(grantee));
    }
    return grant;
  }
}
