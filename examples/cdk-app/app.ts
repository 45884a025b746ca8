import { fileURLToPath } from 'node:url';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { IdempotentMcpEndpoint } from 'idempotent-mcp/cdk';
import { IdempotentMcpChecks } from 'idempotent-mcp/cdk/nag';

const app = new App();
const stack = new Stack(app, 'MyTeamEndpoint');
new IdempotentMcpEndpoint(stack, 'Endpoint', {
  // esbuild bundles this file into the MCP function and the reconciler.
  tools: fileURLToPath(new URL('./tools.ts', import.meta.url)),
  // esbuild bundles this one into the outbox consumer: it delivers the events the tools commit.
  deliveries: fileURLToPath(new URL('./deliveries.ts', import.meta.url)),
  environment: { ROOMS_CALENDAR: 'team-calendar', ROOMS_CHAT_WEBHOOK: 'https://chat.example.com/hooks/rooms' },
  // The stack's outputs are the endpoint's: McpUrl, TokenEndpoint, TokenScope, UserPoolId, the approval page's, the
  // table and queues. No tenant exists yet: each is an app client you create (docs/deploy.md); to try the endpoint
  // with one made here, add `auth: { demoClient: true }`.
});

// Synth fails on any cdk-nag finding the constructs have not acknowledged with a reason.
const packs = [new AwsSolutionsChecks(), new IdempotentMcpChecks()];
Validations.of(app).addPlugins(...packs);
const findings = packs.flatMap((pack) =>
  pack.validateScope(app).violations.map((v) => `${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`),
);
if (findings.length > 0) {
  console.error(`cdk-nag findings:\n${findings.join('\n')}`);
  process.exit(1);
}
const assembly = app.synth();
const template = assembly.getStackByName(stack.stackName).template as { Resources: Record<string, { Type: string }> };
const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function').length;
console.log(`synth passed, cdk-nag clean: ${functions} functions in ${assembly.directory}`);
