import { Annotations, CfnOutput, type Duration, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { EnvVars, isTableKeyPrefix } from '../lambdas/config';
import { MAX_APPROVAL_TTL_SECONDS } from '../lambdas/confirmation/core/approval';
import { APPROVAL_CALLBACK_PATH, APPROVALS_PATH } from '../lambdas/core/endpoint-paths';
import { ApprovalPageApi } from './constructs/approval-page';
import { Auth, type ApprovalSignIn, type AuthProps } from './constructs/auth';
import { IdempotencyTable } from './constructs/idempotency-store';
import { McpFunction } from './constructs/mcp-function';
import { Monitoring } from './constructs/monitoring';
import { DEFAULT_CONSUMER_TIMEOUT, OutboxConsumerFunction } from './constructs/outbox-consumer';
import { OutboxQueue } from './constructs/outbox-queue';
import { OutboxRelayFunction } from './constructs/outbox-relay';
import { DEFAULT_RECONCILE_PERIOD, ReconcilerFunction } from './constructs/reconciler';
import {
  checkFunctionOptions,
  type CommonFunctionProps,
  type FunctionNetwork,
  type FunctionOptions,
  type PowertoolsSettings,
} from './constructs/service-function';
import { StackOutput } from './stack-outputs';
import { checkModuleExports } from './tools-check';
import { checkToolsModule, deliveriesFunctionEntry, toolsFunctionEntry } from './tools-entry';

/**
 * Settings of each of the endpoint's functions (`relay` and `consumer` exist only with deliveries).
 *
 * @public
 */
export interface EndpointFunctions {
  /** @default memory 1024 MB, timeout 29 s, no reserved concurrency, ARM_64 */
  readonly mcp?: FunctionOptions;
  /** @default memory 512 MB, timeout 50 s, no reserved concurrency, ARM_64 */
  readonly reconciler?: FunctionOptions;
  /**
   * Its timeout sizes the queue's visibility timeout (six times it); a reserved concurrency must be at least 5 (the
   * event source's maximum concurrency).
   * @default memory 512 MB, timeout 60 s, no reserved concurrency, ARM_64
   */
  readonly consumer?: FunctionOptions;
  /** @default memory 512 MB, timeout 30 s, no reserved concurrency, ARM_64 */
  readonly relay?: FunctionOptions;
}

const FUNCTION_NAMES = ['mcp', 'reconciler', 'consumer', 'relay'] as const;

/**
 * The approval page, where a person approves a `confirmation: 'approval'` tool's call, signed in.
 *
 * @public
 */
export interface ApprovalPageSettings {
  /**
   * Serve the page. False: no page, and `confirmation: 'approval'` tools answer CONFIRMATION_UNAVAILABLE.
   * @default true with the stack's own Cognito pool; with `auth.external`, true when `signIn` is given
   */
  readonly enabled?: boolean;
  /**
   * With `auth.external` only: your issuer's OAuth client for the page (public, authorization code with PKCE), with
   * `approvalCallbackUrl` registered as its redirect URI. Its ID tokens must carry the person's tenant.
   * @default none: with the stack's own pool, the stack creates the client and its managed login
   */
  readonly signIn?: ApprovalSignIn;
  /**
   * How long an approval link can be decided (whole seconds, at most a day).
   * @default Duration.minutes(15)
   */
  readonly linkLifetime?: Duration;
}

/**
 * What every endpoint is configured with, the reference stack and a team's IdempotentMcpEndpoint alike.
 *
 * @public
 */
export interface EndpointSettings extends FunctionNetwork {
  /**
   * Who may call.
   * @default a new Cognito user pool issuing client-credentials tokens (tenant = app client id)
   */
  readonly auth?: AuthProps;
  /**
   * Bound of one downstream call by a tool, a delivery or a reconcile check (DOWNSTREAM_TIMEOUT_MS).
   * @default Duration.seconds(3)
   */
  readonly downstreamTimeout?: Duration;
  /**
   * Browser origins allowed to call the MCP URL.
   * @default none: only non-browser clients
   */
  readonly allowedOrigins?: string[];
  /**
   * Tools with `confirmation: 'required'` that 2025-era clients may call without the person's confirmation through the
   * server (for clients that confirm on their side).
   * @default none: those clients get CONFIRMATION_UNAVAILABLE
   */
  readonly confirmationOptOut?: string[];
  /**
   * Tools with `confirmation: 'approval'` that a 2026-07-28 client without URL elicitation may confirm in a form
   * instead (the client's word, not a signed-in person's).
   * @default none: those clients get the approval link as a tool result (APPROVAL_REQUIRED)
   */
  readonly confirmationFormFallback?: string[];
  /**
   * Set when a custom domain fronts the Function URL (https): then the approval page is served there too.
   * @default the request's own host; the approval page gets an HTTP API of its own
   */
  readonly publicBaseUrl?: string;
  /**
   * The approval page and how people sign in at it.
   * @default served, people signing in at the stack's Cognito pool (with `auth.external`: off unless `signIn` is given)
   */
  readonly approvalPage?: ApprovalPageSettings;
  /**
   * A table you already have, instead of a new one. It must have the schema the toolkit writes (`TableSchema`):
   * partition key `pk` (string), sort key `sk` (string), TTL on `expires_at`, a global secondary index `attention`
   * (partition key `attention_pk` string, sort key `attention_at` number, ALL projected), and with deliveries a
   * stream with NEW_IMAGE, its ARN given as `tableStreamArn` (`Table.fromTableAttributes`, with `encryptionKey` if
   * it has a customer managed key). `customerManagedKey` and `tableRemovalPolicy` do not apply to it.
   * @default a new table with that schema
   */
  readonly existingTable?: dynamodb.ITable;
  /**
   * Encrypt the new table with a new customer managed KMS key ($1/month) instead of the AWS managed key.
   * @default false
   */
  readonly customerManagedKey?: boolean;
  /**
   * A duplicate after a redeploy must still replay: DESTROY only for throw-away stacks.
   * @default RemovalPolicy.RETAIN
   */
  readonly tableRemovalPolicy?: RemovalPolicy;
  /**
   * Memory, timeout, reserved concurrency and architecture, per function.
   * @default each function's own (see EndpointFunctions)
   */
  readonly functions?: EndpointFunctions;
  /**
   * Service name, metrics namespace and log level of every function.
   * @default `idempotent-mcp`, `IdempotentMcp`, INFO
   */
  readonly powertools?: PowertoolsSettings;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Where alarms go.
   * @default nowhere (they still show in the console)
   */
  readonly alarmTopic?: sns.ITopic;
  /**
   * More functions whose errors and throttles raise the endpoint's alarms.
   * @default none
   */
  readonly monitoredFunctions?: Record<string, lambda.IFunction>;
  /**
   * A small CloudWatch dashboard.
   * @default true
   */
  readonly dashboard?: boolean;
  /**
   * How often the reconciler runs (at least 1 minute, the shortest EventBridge rate); also what `unknown` answers
   * suggest waiting.
   * @default Duration.minutes(1)
   */
  readonly reconcilePeriod?: Duration;
  /**
   * Checks of an unreachable downstream before a record is parked as NEEDS_REVIEW.
   * @default 8
   */
  readonly reconcileMaxAttempts?: number;
  /**
   * Add the stack outputs a team needs (named as `StackOutput` says): the MCP URL, what a token request needs
   * (TokenEndpoint, TokenScope, UserPoolId, and with `auth.demoClient` ClientId and ClientSecretCommand), the approval
   * page's, and what `idempotent-mcp ops --stack` reads. They are the stack's own outputs, by these names: a
   * second endpoint in one stack sets this to false.
   * @default true
   */
  readonly outputs?: boolean;
}

/** @public */
export interface IdempotentMcpEndpointProps extends EndpointSettings {
  /**
   * Your tools module: a .ts or .js file exporting `tools`, an array of defineWriteTool / defineReadTool results
   * (and optionally `withClients`). esbuild bundles it into the MCP function and the reconciler (whose reconcile
   * hooks settle lost outcomes). The synth loads it once in a child process and refuses a module that does not
   * export that. Required: an endpoint serves only the tools you give it.
   */
  readonly tools: string;
  /**
   * Your deliveries module: a .ts or .js file exporting `deliveries`, an object of delivery handlers by outbox event
   * type (`{ 'invoice.send': { deliver, verify } }`), for the events your tools commit. esbuild bundles it into the
   * outbox consumer, which runs each event's `deliver` once. With it the endpoint has an outbox (the table's stream,
   * a relay, a queue and its dead-letter queue, the consumer).
   * @default none: no outbox; a tool that queues an effect answers `failed` / OUTBOX_DISABLED
   */
  readonly deliveries?: string;
  /**
   * Whose records and outbox events these are on a table shared with other endpoints or gateways (`existingTable`):
   * its functions get it as TABLE_KEY_PREFIX, so its reconciler settles, and its relay and consumer take, only its
   * own; the relay's stream filter passes only its events. Letters, digits and _ . : -.
   * @default none (the table's unprefixed owner: give every other endpoint on the table one)
   */
  readonly tableKeyPrefix?: string;
  /**
   * Settings your code reads, added to the functions that run it (MCP, reconciler; the consumer with `deliveries`).
   * The endpoint's own names are refused.
   * @default none
   */
  readonly environment?: Record<string, string>;
  /**
   * What your code may do (a bucket, another table, a queue), granted to the functions that run it, as `environment`.
   * Or grant to `mcpFunction`, `reconcilerFunction` and `consumerFunction` yourself.
   * @default none
   */
  readonly grants?: iam.PolicyStatement[];
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const OWN_NAMES = new Set(Object.values(EnvVars).map((v) => v.name));

function checkEnvironment(environment: Record<string, string>) {
  for (const [name, value] of Object.entries(environment)) {
    if (!ENV_NAME.test(name)) throw new Error(`IdempotentMcpEndpoint: environment.${name} is not a valid variable name`);
    if (OWN_NAMES.has(name)) throw new Error(`IdempotentMcpEndpoint: environment.${name} is set by the endpoint itself; use its own prop`);
    if (name.startsWith('AWS_')) throw new Error(`IdempotentMcpEndpoint: environment.${name} is reserved by Lambda`);
    if (typeof value !== 'string') throw new Error(`IdempotentMcpEndpoint: environment.${name} must be a string`);
  }
}

function checkSettings(props: IdempotentMcpEndpointProps, outbox: boolean) {
  if (props.reconcilePeriod && props.reconcilePeriod.toMilliseconds() < DEFAULT_RECONCILE_PERIOD.toMilliseconds()) {
    throw new Error('IdempotentMcpEndpoint: reconcilePeriod must be at least 1 minute (the shortest EventBridge rate)');
  }
  for (const origin of props.allowedOrigins ?? []) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin))
      throw new Error(`IdempotentMcpEndpoint: allowedOrigins has '${origin}', not an origin (scheme://host[:port])`);
  }
  for (const name of Object.keys(props.functions ?? {})) {
    if (!(FUNCTION_NAMES as readonly string[]).includes(name))
      throw new Error(`IdempotentMcpEndpoint: functions.${name} is not one of the endpoint's functions (${FUNCTION_NAMES.join(', ')})`);
  }
  for (const name of FUNCTION_NAMES) {
    const options = props.functions?.[name];
    if (!outbox && options && (name === 'consumer' || name === 'relay')) {
      throw new Error(`IdempotentMcpEndpoint: functions.${name} is set, but the endpoint has no ${name} without a deliveries module`);
    }
    checkFunctionOptions(`IdempotentMcpEndpoint: functions.${name}`, options);
  }
  checkApprovalPage(props);
  if (!props.vpc && (props.vpcSubnets || props.securityGroups?.length))
    throw new Error('IdempotentMcpEndpoint: vpcSubnets and securityGroups need a vpc');
  if (props.existingTable) {
    for (const prop of ['customerManagedKey', 'tableRemovalPolicy'] as const) {
      if (props[prop] !== undefined)
        throw new Error(`IdempotentMcpEndpoint: ${prop} cannot be set with existingTable (your stack owns that table)`);
    }
    if (outbox && !props.existingTable.tableStreamArn) {
      throw new Error(
        'IdempotentMcpEndpoint: existingTable needs its stream (NEW_IMAGE) with deliveries: give its tableStreamArn (Table.fromTableAttributes), the outbox relay reads it',
      );
    }
  }
}

const HTTPS_URL = /^https:\/\/[^\s/?#]+(\/[^\s?#]*)?$/;

function checkApprovalPage(props: IdempotentMcpEndpointProps) {
  const page = props.approvalPage ?? {};
  const external = props.auth?.external !== undefined;
  if (props.auth?.approvalPage)
    throw new Error(
      'IdempotentMcpEndpoint: auth.approvalPage is set by the endpoint itself from approvalPage and publicBaseUrl; leave it out',
    );
  if (page.signIn && !external)
    throw new Error(
      "IdempotentMcpEndpoint: approvalPage.signIn needs auth.external (the page verifies people's ID tokens at the issuer that signs the agents' tokens); with the stack's own pool, the stack creates the client",
    );
  if (page.enabled === true && external && !page.signIn)
    throw new Error(
      "IdempotentMcpEndpoint: approvalPage.enabled with auth.external needs approvalPage.signIn (your issuer's client id, authorization and token endpoints for the page)",
    );
  if (page.signIn) {
    const { clientId, authorizeUrl, tokenUrl, scopes, tenantClaim } = page.signIn;
    if (!Token.isUnresolved(clientId) && !/^[\x21-\x7e]+$/.test(clientId ?? ''))
      throw new Error('IdempotentMcpEndpoint: approvalPage.signIn.clientId must be a client id (printable, no spaces)');
    for (const [name, url] of [
      ['authorizeUrl', authorizeUrl],
      ['tokenUrl', tokenUrl],
    ] as const) {
      if (!Token.isUnresolved(url) && !HTTPS_URL.test(url ?? ''))
        throw new Error(`IdempotentMcpEndpoint: approvalPage.signIn.${name} must be an https URL (got '${String(url).slice(0, 80)}')`);
    }
    const badScope = scopes?.find((scope) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(scope));
    if (badScope !== undefined) throw new Error(`IdempotentMcpEndpoint: approvalPage.signIn.scopes has '${badScope}', not an OAuth scope`);
    if (tenantClaim !== undefined && !/^\S+$/.test(tenantClaim))
      throw new Error('IdempotentMcpEndpoint: approvalPage.signIn.tenantClaim must be a claim name without spaces');
  }
  const lifetime = page.linkLifetime?.toSeconds({ integral: false });
  if (lifetime !== undefined && (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_APPROVAL_TTL_SECONDS))
    throw new Error(`IdempotentMcpEndpoint: approvalPage.linkLifetime must be whole seconds from 1 to ${MAX_APPROVAL_TTL_SECONDS} (a day)`);
  // The page's callback is registered on it, and issuers accept only https callbacks.
  if (servesApprovalPage(props) && props.publicBaseUrl && !Token.isUnresolved(props.publicBaseUrl) && !HTTPS_URL.test(props.publicBaseUrl))
    throw new Error(
      `IdempotentMcpEndpoint: publicBaseUrl must be an https URL without query or fragment when it serves the approval page (got '${props.publicBaseUrl.slice(0, 80)}')`,
    );
}

/** Whether the page is served: on by default with the stack's pool, with an external issuer only given its client. */
const servesApprovalPage = (props: IdempotentMcpEndpointProps) =>
  props.approvalPage?.enabled ?? (props.auth?.external === undefined || props.approvalPage?.signIn !== undefined);

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
  /** The table and its exact grants. */
  readonly store: IdempotencyTable;
  /** The table of records, business items and outbox events (the new one, or `existingTable`). */
  readonly table: dynamodb.ITable;
  /** Who may call: the Cognito user pool, or the external issuer's settings. */
  readonly auth: Auth;
  readonly mcp: McpFunction;
  readonly reconciler: ReconcilerFunction;
  /** The outbox queue and its dead-letter queue; only with `deliveries`. */
  readonly outbox?: OutboxQueue;
  /** Only with `deliveries`. */
  readonly relay?: OutboxRelayFunction;
  /** Only with `deliveries`. */
  readonly consumer?: OutboxConsumerFunction;
  readonly monitoring: Monitoring;
  /** The MCP function (its `grantPrincipal` is its role): grant it what your tools call. */
  readonly mcpFunction: lambda.IFunction;
  /** The reconciler (its `grantPrincipal` is its role): grant it what your reconcile hooks call. */
  readonly reconcilerFunction: lambda.IFunction;
  /** The outbox consumer, only with `deliveries`: grant it what your deliveries call. */
  readonly consumerFunction?: lambda.IFunction;
  /** The outbox relay, only with `deliveries`. */
  readonly relayFunction?: lambda.IFunction;
  /** The approval page's HTTP API; only with the page and no `publicBaseUrl`. */
  readonly approvalPageApi?: ApprovalPageApi;
  /** Where approval links point (`<base>/approvals`); only with the page. */
  readonly approvalPageUrl?: string;
  /** The redirect URI of the page's sign-in client (register it at an external issuer); only with the page. */
  readonly approvalCallbackUrl?: string;

  constructor(scope: Construct, id: string, props: IdempotentMcpEndpointProps) {
    super(scope, id);
    const tools = checkToolsModule('IdempotentMcpEndpoint: tools', props?.tools);
    const deliveries =
      props.deliveries === undefined ? undefined : checkToolsModule('IdempotentMcpEndpoint: deliveries', props.deliveries, 'deliveries');
    const outbox = deliveries !== undefined;
    this.toolsModule = tools;
    this.deliveriesModule = deliveries;
    checkEnvironment(props.environment ?? {});
    checkSettings(props, outbox);
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
      : new IdempotencyTable(this, 'Store', { encryptionKey, removalPolicy: tableRemovalPolicy, stream: outbox });
    this.table = this.store.table;
    // The page's address comes first and depends on nothing else: the sign-in client registers its callback, the
    // function is told the client, and only then do the page's routes reach the function (no cycle).
    let pageBase: string | undefined;
    if (servesApprovalPage(props)) {
      if (props.publicBaseUrl) pageBase = props.publicBaseUrl.replace(/\/+$/, '');
      else {
        this.approvalPageApi = new ApprovalPageApi(this, 'ApprovalPage', { logRetention: props.logRetention });
        pageBase = this.approvalPageApi.baseUrl;
      }
      this.approvalPageUrl = `${pageBase}${APPROVALS_PATH}`;
      this.approvalCallbackUrl = `${pageBase}${APPROVAL_CALLBACK_PATH}`;
    }
    const cognitoPage = this.approvalCallbackUrl !== undefined && !props.auth?.external;
    this.auth = new Auth(this, 'Auth', {
      ...props.auth,
      approvalPage: cognitoPage ? { callbackUrl: this.approvalCallbackUrl! } : undefined,
    });
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
      outbox,
      approvalPage:
        pageBase !== undefined && signIn
          ? { signIn, baseUrl: this.approvalPageApi ? pageBase : undefined, linkLifetime: props.approvalPage?.linkLifetime }
          : undefined,
    });
    this.approvalPageApi?.serve(this.mcp.handler.function);
    if (deliveries !== undefined) {
      const consumerTimeout = props.functions?.consumer?.timeout ?? DEFAULT_CONSUMER_TIMEOUT;
      this.outbox = new OutboxQueue(this, 'Outbox', { consumerTimeout });
      this.relay = new OutboxRelayFunction(this, 'Relay', { ...fn('relay'), store: this.store, queue: this.outbox, keyPrefix });
      this.consumer = new OutboxConsumerFunction(this, 'Consumer', {
        ...fn('consumer'),
        entry: deliveriesFunctionEntry(deliveries, tools),
        store: this.store,
        queue: this.outbox,
        downstreamTimeout: props.downstreamTimeout,
        timeout: consumerTimeout,
      });
    }
    this.reconciler = new ReconcilerFunction(this, 'Reconciler', {
      ...fn('reconciler'),
      entry: toolsFunctionEntry('reconciler', tools),
      store: this.store,
      queue: this.outbox,
      downstreamTimeout: props.downstreamTimeout,
      period: props.reconcilePeriod,
      maxAttempts: props.reconcileMaxAttempts,
    });
    this.mcpFunction = this.mcp.handler.function;
    this.reconcilerFunction = this.reconciler.handler.function;
    this.relayFunction = this.relay?.handler.function;
    this.consumerFunction = this.consumer?.handler.function;
    this.monitoring = new Monitoring(this, 'Monitoring', {
      functions: {
        Mcp: this.mcpFunction,
        ...(this.relayFunction ? { Relay: this.relayFunction } : {}),
        ...(this.consumerFunction ? { Consumer: this.consumerFunction } : {}),
        Reconciler: this.reconcilerFunction,
        ...props.monitoredFunctions,
      },
      deadLetterQueue: this.outbox?.deadLetterQueue,
      powertools: props.powertools,
      alarmTopic: props.alarmTopic,
      dashboard: props.dashboard,
    });

    for (const handler of [this.mcp.handler, this.reconciler.handler, ...(this.consumer ? [this.consumer.handler] : [])]) {
      if (keyPrefix !== undefined) handler.function.addEnvironment(EnvVars.tableKeyPrefix.name, keyPrefix);
      for (const [name, value] of Object.entries(props.environment ?? {})) handler.function.addEnvironment(name, value);
      for (const statement of props.grants ?? []) handler.role.addToPrincipalPolicy(statement);
    }
    if (props.outputs !== false) this.addOutputs();
  }

  /** The stack outputs this endpoint adds (see `outputs`), by the names of StackOutput. */
  private addOutputs(): void {
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
    output(StackOutput.queue, this.outbox?.queue.queueUrl);
    output(StackOutput.deadLetterQueue, this.outbox?.deadLetterQueue.queueUrl);
    output(StackOutput.dashboard, this.monitoring.dashboard?.dashboardName);
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
    if (this.outbox) {
      grant = grant
        .combine(this.outbox.deadLetterQueue.grantConsumeMessages(grantee))
        .combine(this.outbox.queue.grantSendMessages(grantee));
    }
    return grant;
  }
}
