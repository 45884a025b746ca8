import { App, Duration, Stack, Validations } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { AwsSolutionsChecks, type NagPack } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { IdempotentMcpChecks } from 'idempotent-mcp/cdk/nag';
import { synthStack } from './support';

/**
 * cdk-nag 3 runs as a CDK policy-validation plugin (bin/app.ts registers it, so `cdk synth` fails on a finding);
 * here each pack validates the construct tree directly. Acknowledged findings (Validations.of(x).acknowledge) are
 * not reported; everything else is.
 */
function findings(scope: IConstruct, pack: NagPack) {
  return pack.validateScope(scope).violations.map((v) => ({
    rule: v.ruleName,
    severity: v.severity,
    at: v.violatingResources.map((r) => r.constructPath),
  }));
}

const packs = () => [new AwsSolutionsChecks(), new IdempotentMcpChecks()];

const variants: Record<string, Record<string, unknown>> = {
  default: {},
  'demo: sandbox, alarm e-mail, customer managed key': {
    sandbox: 'true',
    alarmEmail: 'ops@example.com',
    customerManagedKey: 'true',
  },
  'SES email and an existing OIDC issuer': {
    emailFrom: 'agent@mail.example.com',
    authIssuer: 'https://login.example.com',
    authAudience: 'mcp',
  },
  'an external issuer with its client for the approval page, on a custom domain': {
    authIssuer: 'https://login.example.com',
    authAudience: 'mcp',
    approvalClientId: 'approval-page',
    approvalAuthorizeUrl: 'https://login.example.com/authorize',
    approvalTokenUrl: 'https://login.example.com/token',
    publicBaseUrl: 'https://mcp.example.com',
  },
};

describe('cdk-nag (AwsSolutions and the project pack)', () => {
  for (const [name, context] of Object.entries(variants)) {
    it(`reports nothing unacknowledged on the ${name} stack`, () => {
      const { app } = synthStack(context);
      for (const pack of packs()) expect(findings(app, pack)).toEqual([]);
    });
  }

  it('carries a reason on every acknowledgment', () => {
    const { app } = synthStack(variants['demo: sandbox, alarm e-mail, customer managed key']!);
    const acknowledged: Array<[string, string]> = [];
    for (const construct of app.node.findAll()) {
      for (const entry of construct.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        acknowledged.push(...Object.entries(entry.data as Record<string, string>));
      }
    }
    expect(acknowledged.length).toBeGreaterThan(0);
    for (const [id, reason] of acknowledged) {
      expect(reason.length, id).toBeGreaterThan(40);
    }
  });

  it('catches what the project pack is for: a public Function URL, a short visibility timeout, logs kept forever', () => {
    const stack = new Stack(new App(), 'Unsafe');
    const fn = new lambda.Function(stack, 'Fn', {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('export const handler = async () => {}'),
      timeout: Duration.seconds(60),
    });
    fn.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.NONE });
    fn.addEventSource(new SqsEventSource(new sqs.Queue(stack, 'Queue', { visibilityTimeout: Duration.seconds(120) })));
    new logs.LogGroup(stack, 'Logs', { retention: logs.RetentionDays.INFINITE });
    const rules = findings(stack, new IdempotentMcpChecks()).map((f) => f.rule);
    expect(rules).toEqual(
      expect.arrayContaining([
        'IdempotentMcp-LambdaFunctionUrlAuth',
        'IdempotentMcp-SQSVisibilityTimeout',
        'IdempotentMcp-LogGroupRetention',
      ]),
    );
  });
});
