/** The cdk-nag rules of `idempotent-mcp/cdk/nag` (exports/cdk-nag.ts). */
import type { CfnResource } from 'aws-cdk-lib';
import { NagMessageLevel, NagPack, rules, type NagPackProps } from 'cdk-nag';
import type { IConstruct } from 'constructs';

/**
 * Rules cdk-nag ships but leaves out of the AwsSolutions pack, which this stack depends on: a public Function URL
 * must be a deliberate, explained choice, and the outbox queue must outlast six consumer timeouts.
 * Applied next to AwsSolutionsChecks in the app and in the tests.
 * @public
 */
export class IdempotentMcpChecks extends NagPack {
  /** The pack's name as a CDK policy-validation plugin; its findings' ids start with `IdempotentMcp-`. */
  readonly name = 'IdempotentMcp';

  constructor(scope?: IConstruct, props?: NagPackProps) {
    super(scope, props);
    this.packName = 'IdempotentMcp';
  }

  /** Applies the pack's rules to one resource: cdk-nag calls it for each CfnResource of the scope. */
  protected checkResource(node: CfnResource): void {
    this.applyRule({
      ruleSuffixOverride: 'LambdaFunctionUrlAuth',
      info: 'The Lambda Function URL has auth type NONE.',
      explanation: 'A public URL must authenticate every request itself; say how in the suppression.',
      level: NagMessageLevel.ERROR,
      rule: rules.lambda.LambdaFunctionUrlAuth,
      node,
    });
    this.applyRule({
      ruleSuffixOverride: 'SQSVisibilityTimeout',
      info: 'The SQS visibility timeout is below six times the consuming function timeout.',
      explanation: 'A batch still running when its messages become visible again is delivered a second time.',
      level: NagMessageLevel.ERROR,
      rule: rules.lambda.LambdaEventSourceSQSVisibilityTimeout,
      node,
    });
    this.applyRule({
      ruleSuffixOverride: 'LogGroupRetention',
      info: 'The log group keeps logs forever.',
      explanation: 'Unbounded retention costs grow forever; every log group sets a retention period.',
      level: NagMessageLevel.ERROR,
      rule: rules.cloudwatch.CloudWatchLogGroupRetentionPeriod,
      node,
    });
  }
}
