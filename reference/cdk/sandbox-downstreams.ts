import { Duration, Fn, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { fileURLToPath } from 'node:url';
import { ServiceFunction, type ServiceFunctionProps } from 'idempotent-mcp/cdk';
import { EnvVars, environmentOf } from 'idempotent-mcp/lambda';
import { referenceEnvironmentOf } from '../config';
import type { DownstreamSettings } from './downstreams';

export interface SandboxDownstreamsProps extends Pick<ServiceFunctionProps, 'powertools' | 'logRetention' | 'architecture'> {
  /** The callers' downstream timeout: the `commit-then-timeout` fault holds its answer past it. */
  downstreamTimeoutMs?: number;
}

/**
 * Demo only, off unless the `sandbox` flag is set: the payments provider, ticket system and mailbox the tests run
 * against locally, behind their own public Function URL, with their own throw-away table. Their ledger and fault
 * API (POST /sandbox/faults) let a demo show one call making one effect, and what each fault mode does.
 */
export class SandboxDownstreams extends Construct {
  readonly handler: ServiceFunction;
  readonly table: dynamodb.Table;
  readonly url: lambda.FunctionUrl;
  private readonly timeoutMs: number;

  constructor(scope: Construct, id: string, props: SandboxDownstreamsProps = {}) {
    super(scope, id);
    this.timeoutMs = props.downstreamTimeoutMs ?? EnvVars.downstreamTimeoutMs.parse(undefined);
    this.table = new dynamodb.Table(this, 'Table', {
      // The keys the sandbox's store writes (reference/sandbox/sandbox-store.ts).
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // Fake ledgers for a demo: nothing here is worth keeping after `cdk destroy`.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.handler = new ServiceFunction(this, 'Handler', {
      powertools: props.powertools,
      logRetention: props.logRetention,
      architecture: props.architecture,
      entry: fileURLToPath(new URL('../handlers/sandbox.ts', import.meta.url)),
      description: 'Sandbox downstreams (demo only): payments, tickets, mailbox, faults, ledger',
      timeout: Duration.seconds(30),
      environment: {
        ...referenceEnvironmentOf({ sandboxTableName: this.table.tableName }),
        ...environmentOf({ downstreamTimeoutMs: this.timeoutMs }),
      },
    });
    // The sandbox's own table only; it holds no real data, so the full item API is fine (still no Scan).
    this.table.grant(
      this.handler.role,
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
      'dynamodb:DeleteItem',
      'dynamodb:Query',
    );
    this.url = this.handler.function.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.NONE });
    Validations.of(this.url).acknowledge({
      id: 'IdempotentMcp-LambdaFunctionUrlAuth',
      reason:
        "Demo-only fake downstreams (deployed only with the sandbox flag): the stack's functions call them with plain HTTP like real third-party APIs, and they hold nothing but the demo's fake ledger.",
    });
  }

  /** The base URL of the sandbox routes (the Function URL ends with '/'). */
  private base(path: string): string {
    return Fn.join('', [this.url.url, 'sandbox/', path]);
  }

  /** Points the side-effect tools at the sandbox; SES is not used. */
  get downstreams(): DownstreamSettings {
    return {
      paymentsUrl: this.base('payments'),
      ticketsUrl: this.base('tickets'),
      mailboxUrl: this.base('mailbox'),
      emailMode: 'sandbox',
      timeoutMs: this.timeoutMs,
    };
  }
}
