import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { IdempotentMcpChecks } from 'idempotent-mcp/cdk/nag';
import { settingsFromContext } from '../reference/cdk/context';
import { IdempotentMcpStack } from '../reference/cdk/idempotent-mcp-stack';

/**
 * `cdk synth` / `cdk deploy`. Environment-agnostic (no account or region lookups), so synth works offline;
 * `cdk deploy` takes the account and region from your AWS profile. Settings: see reference/cdk/context.ts (`-c key=value`).
 */
const app = new App();
try {
  const settings = settingsFromContext(app.node);
  new IdempotentMcpStack(app, settings.stackName, settings.props);
  if (settings.nag) {
    // Synth fails on any finding not acknowledged with a reason (Validations.of(construct).acknowledge); the
    // acknowledgments are written into the template's resource metadata (`cdk_nag`) as an audit trail.
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { writeSuppressionsToCloudFormation: true }), new IdempotentMcpChecks(app));
  }
} catch (err) {
  // A setting the stack refuses (a bad `-c key=value`, a missing companion setting) is one line naming it, not a
  // stack trace; `cdk synth --debug` (CDK_DEBUG) keeps the trace.
  if (process.env.CDK_DEBUG === 'true') throw err;
  console.error(`Settings refused: ${(err as Error).message}`);
  // The CDK CLI adds its own "Subprocess exited with error 1" for any app that exits non-zero; only exiting 0 would
  // silence it, and that would tell scripts and CI the synth succeeded.
  process.exit(1);
}
app.synth();
