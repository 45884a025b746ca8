import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { LambdaBundle } from '../../lib/bundling';
import { IdempotentMcpEndpoint, type IdempotentMcpEndpointProps } from 'idempotent-mcp/cdk';
import { IdempotentMcpChecks } from 'idempotent-mcp/cdk/nag';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { deliveriesFunctionEntry, toolsFunctionEntry } from '../../lib/tools-entry';
import { cdkJsonContext, logicalId, statementsOfRole } from './support';

const TOOLS = join(PROJECT_ROOT, 'examples/cdk-app/tools.ts');
const DELIVERIES = join(PROJECT_ROOT, 'examples/cdk-app/deliveries.ts');

function endpointStack(props: Partial<IdempotentMcpEndpointProps> = {}) {
  const app = new App({ context: { ...cdkJsonContext, 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Team');
  const endpoint = new IdempotentMcpEndpoint(stack, 'Endpoint', { tools: TOOLS, ...props });
  return { app, endpoint, template: Template.fromStack(stack) };
}

describe("IdempotentMcpEndpoint: a team's tools on the whole endpoint", () => {
  const bucketRead = new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: ['arn:aws:s3:::team-bucket/rooms.json'] });
  const { app, endpoint, template } = endpointStack({ environment: { ROOMS_CALENDAR: 'team' }, grants: [bucketRead] });
  const resources = template.toJSON().Resources;
  const envOf = (fn: { node: { defaultChild?: unknown } }) => resources[logicalId(fn)].Properties.Environment.Variables;

  it('bundles the MCP function and the reconciler from the tools module, through the package handler factories', () => {
    for (const fn of ['mcp', 'reconciler'] as const) {
      const entry = readFileSync(toolsFunctionEntry(fn, TOOLS), 'utf8');
      expect(entry).toContain(`import * as toolsModule from ${JSON.stringify(TOOLS)};`);
      expect(entry).toContain(`${fn}LambdaHandler(toolsModule)`);
    }
    expect(Object.values(resources).filter((r: any) => r.Type === 'AWS::Lambda::Function')).toHaveLength(4);
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    template.resourceCountIs('AWS::Lambda::Url', 1);
    template.resourceCountIs('AWS::Events::Rule', 1);
  });

  it("gives the tools' settings and grants to the functions that run them, and only those", () => {
    expect(envOf(endpoint.mcp.handler.function)).toMatchObject({ ROOMS_CALENDAR: 'team', TABLE_NAME: expect.anything() });
    expect(envOf(endpoint.reconciler.handler.function)).toMatchObject({ ROOMS_CALENDAR: 'team', RECONCILE_INTERVAL_MS: '60000' });
    expect(envOf(endpoint.consumer.handler.function)).not.toHaveProperty('ROOMS_CALENDAR');
    for (const fn of [endpoint.mcp, endpoint.reconciler]) {
      expect(statementsOfRole(template, logicalId(fn.handler.role))).toContainEqual(expect.objectContaining({ Action: 's3:GetObject' }));
    }
    expect(statementsOfRole(template, logicalId(endpoint.relay.handler.role)).flatMap((s) => s.Action)).not.toContain('s3:GetObject');
  });

  it('is cdk-nag clean', () => {
    for (const pack of [new AwsSolutionsChecks(), new IdempotentMcpChecks()]) expect(pack.validateScope(app).violations.map((v) => [v.ruleName, v.violatingResources.map((r) => r.constructPath)])).toEqual([]);
  });

  it('fails the synth naming the prop that is wrong', () => {
    expect(() => endpointStack({ tools: undefined as unknown as string })).toThrow(/IdempotentMcpEndpoint: tools must be the path of your tools module/);
    expect(() => endpointStack({ tools: join(PROJECT_ROOT, 'examples/cdk-app/missing.ts') })).toThrow(/IdempotentMcpEndpoint: tools: no such file/);
    expect(() => endpointStack({ tools: join(PROJECT_ROOT, 'examples/cdk-app/cdk.json') })).toThrow(/IdempotentMcpEndpoint: tools must be a \.ts/);
    expect(() => endpointStack({ deliveries: '' })).toThrow(/IdempotentMcpEndpoint: deliveries must be the path of your deliveries module \(a \.ts or \.js file exporting `deliveries`\)/);
    expect(() => endpointStack({ deliveries: join(PROJECT_ROOT, 'examples/cdk-app/missing.ts') })).toThrow(/IdempotentMcpEndpoint: deliveries: no such file/);
    expect(() => endpointStack({ environment: { TABLE_NAME: 'x' } })).toThrow(/environment\.TABLE_NAME is set by the endpoint itself/);
    expect(() => endpointStack({ environment: { 'bad-name': 'x' } })).toThrow(/environment\.bad-name is not a valid variable name/);
    expect(() => endpointStack({ reconcilePeriod: Duration.seconds(30) })).toThrow(/reconcilePeriod must be at least 1 minute/);
    expect(() => endpointStack({ allowedOrigins: ['https://app.example.com/path'] })).toThrow(/allowedOrigins has 'https:\/\/app\.example\.com\/path'/);
  });
});

describe("a team's endpoint serves the team's tools only", () => {
  /** A function's bundle as esbuild builds it for the deploy (lib/bundling.ts), the subpaths resolving to the sources. */
  async function bundleOf(entry: string) {
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      platform: LambdaBundle.platform,
      format: LambdaBundle.format,
      target: LambdaBundle.target,
      mainFields: [...LambdaBundle.mainFields],
      alias: { ...LambdaBundle.alias },
      tsconfig: join(PROJECT_ROOT, 'tsconfig.json'),
      write: false,
      metafile: true,
      logLevel: 'error',
      outfile: 'index.mjs',
    });
    return { code: result.outputFiles[0]!.text, inputs: Object.keys(result.metafile.inputs) };
  }

  it("bundles no demo tool into the MCP function of a team's endpoint; the reference endpoint's carries them", async () => {
    const team = await bundleOf(toolsFunctionEntry('mcp', TOOLS));
    expect(team.code).toContain('rooms.reserve');
    expect(team.code).not.toContain('request_payment');
    expect(team.inputs.filter((file) => file.includes('reference/tools/'))).toEqual([]);

    const reference = await bundleOf(toolsFunctionEntry('mcp', fileURLToPath(new URL('../../reference/tools/index.ts', import.meta.url))));
    expect(reference.code).toContain('request_payment');
  }, 120_000);
});

describe("a team's deliveries: its own event types, delivered by its own code", () => {
  it("bundles the deliveries module into the outbox consumer, which gets the team's settings and grants", () => {
    const grant = new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: ['arn:aws:s3:::team-bucket/*'] });
    const { endpoint, template } = endpointStack({ deliveries: DELIVERIES, environment: { ROOMS_CHAT_WEBHOOK: 'https://chat.example' }, grants: [grant] });
    const entry = readFileSync(deliveriesFunctionEntry(DELIVERIES, TOOLS), 'utf8');
    expect(entry).toContain(`import * as deliveriesModule from ${JSON.stringify(DELIVERIES)};`);
    expect(entry).toContain('consumerLambdaHandler(deliveriesModule)');
    const resources = template.toJSON().Resources;
    expect(resources[logicalId(endpoint.consumer.handler.function)].Properties.Environment.Variables).toMatchObject({ ROOMS_CHAT_WEBHOOK: 'https://chat.example' });
    expect(statementsOfRole(template, logicalId(endpoint.consumer.handler.role))).toContainEqual(expect.objectContaining({ Action: 's3:PutObject' }));
  });

  it("gives a team's consumer no demo deliveries when it has no deliveries module", async () => {
    const entry = readFileSync(deliveriesFunctionEntry(undefined, TOOLS), 'utf8');
    expect(entry).toContain('consumerLambdaHandler({ deliveries: {} })');
    const { code } = await build({
      entryPoints: [deliveriesFunctionEntry(undefined, TOOLS)],
      bundle: true,
      platform: 'node',
      format: 'esm',
      tsconfig: join(PROJECT_ROOT, 'tsconfig.json'),
      alias: { ...LambdaBundle.alias },
      write: false,
      logLevel: 'error',
    }).then((r) => ({ code: r.outputFiles[0]!.text }));
    expect(code).not.toContain('ticket.create');
  }, 120_000);
});
