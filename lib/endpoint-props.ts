import type { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { ApprovalSignIn, AuthSettings } from './constructs/auth';
import type { FunctionOptions, PowertoolsSettings } from './constructs/service-function';

/*
 * What a team gives `IdempotentMcpEndpoint` (endpoint.ts): its props, each with its documented default. endpoint.ts
 * checks them (endpoint-checks.ts) and builds the endpoint from them.
 */

/** The endpoint's functions, as `functions` names them. */
export const FUNCTION_NAMES: readonly (keyof NonNullable<EndpointSettings['functions']>)[] = ['mcp', 'reconciler', 'consumer', 'relay'];

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
export interface EndpointSettings {
  /**
   * Who may call.
   * @default a new Cognito user pool issuing client-credentials tokens (tenant = app client id)
   */
  readonly auth?: AuthSettings;
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
   * A table you already have, instead of a new one. It must have the schema the toolkit writes (`ensureTable`'s):
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
   * Memory, timeout, reserved concurrency and architecture, per function (`relay` and `consumer` exist only with
   * deliveries).
   * @default each function's own (below)
   */
  readonly functions?: {
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
  };
  /**
   * Run the functions in this VPC. Their subnets need a way to DynamoDB and SQS (gateway / interface endpoints or a
   * NAT), and the MCP function one to the token issuer's JWKS URL and to Secrets Manager.
   * @default none: the functions run outside any VPC
   */
  readonly vpc?: ec2.IVpc;
  /**
   * Which subnets of `vpc`.
   * @default the VPC's private subnets (CDK's default selection)
   */
  readonly vpcSubnets?: ec2.SubnetSelection;
  /**
   * @default one new security group per function, all outbound traffic allowed
   */
  readonly securityGroups?: ec2.ISecurityGroup[];
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
   * Add the stack outputs a team needs: the MCP URL (McpUrl), what a token request needs (TokenEndpoint, TokenScope,
   * UserPoolId, and with `auth.demoClient` ClientId and ClientSecretCommand), the approval page's (ApprovalPageUrl,
   * ApprovalCallbackUrl, ApprovalClientId), what `idempotent-mcp ops --stack` reads (TableName, OutboxQueueUrl,
   * DeadLetterQueueUrl), DashboardName and FunctionRuntime. They are the stack's own outputs, by these names: a
   * second endpoint in one stack sets this to false.
   * @default true
   */
  readonly outputs?: boolean;
}

/**
 * Props of `IdempotentMcpEndpoint`: your tools module (and deliveries module), and the endpoint's settings.
 * @public
 */
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
