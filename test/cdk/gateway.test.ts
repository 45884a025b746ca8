import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayToolsModule } from '../../lambdas/gateway/lambda';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { IdempotentMcpGateway, type IdempotentMcpGatewayProps } from '../../lib/gateway-construct';
import { IdempotentMcpChecks } from '../../lib/nag-checks';
import { actionsOf, cdkJsonContext, logicalId, resourcesOf, serviceActions, statementsOfRole } from './support';

const policy = {
  tools: {
    echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000 },
    'get-sum': { kind: 'read' },
  },
};

let dir: string;
const policyFile = (content: unknown, name = 'policy.json') => {
  const file = join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
};

beforeAll(() => {
  // Inside this repository, as a team's project would be: the generated tools module is written beside it.
  mkdirSync(join(PROJECT_ROOT, '.scratch'), { recursive: true });
  dir = mkdtempSync(join(PROJECT_ROOT, '.scratch', 'gateway-cdk-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function synthGateway(props: Partial<IdempotentMcpGatewayProps> = {}, options: { bundle?: boolean } = {}) {
  const app = new App({
    context: { ...cdkJsonContext, ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }) },
    builtinCloudFormationValidation: false,
    ...(options.bundle ? { outdir: join(dir, 'cdk.out') } : {}),
  });
  const stack = new Stack(app, 'Gateway');
  const credentials = new secretsmanager.Secret(stack, 'UpstreamCredentials', {
    description: "The gateway's upstream credentials by tenant",
  });
  // The team's secret, not the construct's: its value is what the upstream's vendor issued (docs/gateway.md).
  Validations.of(credentials).acknowledge({
    id: 'AwsSolutions-SMG4',
    reason: 'The upstream vendor issues these credentials; they are rotated by replacing the value when the vendor issues new ones.',
  });
  const gateway = new IdempotentMcpGateway(stack, 'Gateway', {
    policy: policyFile(policy),
    upstream: { url: 'https://vendor.example.com/mcp' },
    credentials,
    ...props,
  });
  return { app, stack, gateway, credentials, template: Template.fromStack(stack) };
}

describe('IdempotentMcpGateway (synth)', () => {
  it('deploys the endpoint (table, MCP function and URL, reconciler, alarms) with the upstream URL and the credentials secret by ARN', () => {
    const { template, gateway, credentials, stack } = synthGateway();
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    template.resourceCountIs('AWS::Lambda::Url', 1);
    template.resourceCountIs('AWS::Events::Rule', 1);
    expect(Object.keys(template.findResources('AWS::CloudWatch::Alarm')).length).toBeGreaterThan(0);
    const secretRef = { Ref: stack.getLogicalId(credentials.node.defaultChild as never) };
    for (const fn of [gateway.mcpFunction, gateway.reconcilerFunction]) {
      const variables = template.toJSON().Resources[logicalId(fn)].Properties.Environment.Variables;
      expect(variables.GATEWAY_UPSTREAM_URL).toBe('https://vendor.example.com/mcp');
      expect(variables.GATEWAY_CREDENTIALS_SECRET_ARN).toEqual(secretRef);
      expect(variables.TABLE_NAME).toBeDefined();
    }
    // Only the MCP function keeps the upstream's tools/list it read; the reconciler reads a kept one (it puts no item).
    const keeps = (fn: typeof gateway.mcpFunction) =>
      template.toJSON().Resources[logicalId(fn)].Properties.Environment.Variables.GATEWAY_KEEP_LISTING;
    expect([keeps(gateway.mcpFunction), keeps(gateway.reconcilerFunction)]).toEqual(['true', undefined]);
  });

  it('grants GetSecretValue on the credentials secret alone, to the MCP function and the reconciler (least privilege)', () => {
    const { template, gateway, credentials, stack } = synthGateway();
    const secretRef = { Ref: stack.getLogicalId(credentials.node.defaultChild as never) };
    for (const fn of [gateway.mcpFunction, gateway.reconcilerFunction]) {
      const statements = statementsOfRole(template, logicalId(fn.role! as never));
      const onCredentials = statements.filter((s) => resourcesOf(s).some((r) => JSON.stringify(r) === JSON.stringify(secretRef)));
      expect(onCredentials.flatMap(actionsOf)).toEqual(['secretsmanager:GetSecretValue']);
      expect(serviceActions(statements, 'secretsmanager').every((a) => a === 'secretsmanager:GetSecretValue')).toBe(true);
      expect(statements.flatMap(actionsOf).some((a) => a.endsWith('*'))).toBe(false);
    }
    // The reconciler reads the credentials and the lookup memo; it writes no new item.
    const reconciler = statementsOfRole(template, logicalId(gateway.reconcilerFunction.role! as never));
    expect(serviceActions(reconciler, 'dynamodb')).not.toContain('dynamodb:PutItem');
  });

  it('is cdk-nag clean (AwsSolutions and the project pack)', () => {
    const { app } = synthGateway();
    for (const pack of [new AwsSolutionsChecks(), new IdempotentMcpChecks()]) {
      expect(
        pack.validateScope(app).violations.map((v) => `${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`),
      ).toEqual([]);
    }
  });

  it('leaves no synth warning (the tools module connects to the upstream only deployed)', () => {
    const { stack } = synthGateway();
    const warnings = stack.node.findAll().flatMap((c) => c.node.metadata.filter((m) => m.type === 'aws:cdk:warning'));
    expect(warnings).toEqual([]);
  });

  it('refuses a stdio upstream in one sentence', () => {
    expect(() => synthGateway({ upstream: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] } })).toThrow(
      /^IdempotentMcpGateway: upstream\.command is for a local gateway only \(a stdio server it starts\); deployed, give upstream\.url, the server's streamable-HTTP URL$/,
    );
  });

  it('refuses an upstream URL that is not https', () => {
    expect(() => synthGateway({ upstream: { url: 'http://vendor.example.com/mcp' } })).toThrow(
      /upstream\.url must be the upstream's https URL \(got 'http:\/\/vendor/,
    );
  });

  it('refuses a policy with mistakes at synth, one sentence each naming the tool and the field', () => {
    const bad = policyFile(
      { tools: { echo: { kind: 'write', timeoutMs: 5 }, refund: { kind: 'write', inFlightWindowMs: 0, confirmation: 'maybe' } } },
      'bad.json',
    );
    let message = '';
    try {
      synthGateway({ policy: bad });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^IdempotentMcpGateway: the policy file .*bad\.json is refused\./);
    const lines = message.split('\n').slice(1);
    expect(lines.some((l) => /tool echo/.test(l) && /inFlightWindowMs/.test(l))).toBe(true);
    expect(lines.some((l) => /tool echo/.test(l) && /timeoutMs/.test(l))).toBe(true);
    expect(lines.some((l) => /tool refund/.test(l) && /confirmation/.test(l))).toBe(true);
    expect(lines.every((l) => l.startsWith('- '))).toBe(true);
  });

  it('refuses a policy file that is missing or not JSON', () => {
    expect(() => synthGateway({ policy: join(dir, 'nowhere.json') })).toThrow(
      /^IdempotentMcpGateway: the policy file .*nowhere\.json cannot be read \(ENOENT\)$/,
    );
    expect(() => synthGateway({ policy: policyFile('{ tools: ', 'broken.json') })).toThrow(
      /^IdempotentMcpGateway: the policy file .*broken\.json is not JSON/,
    );
  });

  it('bundles the policy as it is into both functions (esbuild, top-level await in the ESM bundle)', () => {
    const { gateway, template } = synthGateway({}, { bundle: true });
    const assets = join(dir, 'cdk.out');
    for (const fn of [gateway.mcpFunction, gateway.reconcilerFunction]) {
      const code = template.toJSON().Resources[logicalId(fn)].Properties.Code;
      const hash = String(code.S3Key).replace(/\.zip$/, '');
      const folder = readdirSync(assets).find((name) => name === `asset.${hash}`);
      expect(folder, 'the function has a bundled asset').toBeDefined();
      const bundle = readFileSync(join(assets, folder!, 'index.mjs'), 'utf8');
      expect(bundle).toContain('get-sum');
      expect(bundle).toContain('GATEWAY_CREDENTIALS_SECRET_ARN');
      expect(bundle.length).toBeLessThan(20_000_000);
    }
  }, 240_000);

  it("the functions' tools module refuses a cold start without the settings the construct writes, in one sentence", async () => {
    await expect(gatewayToolsModule(policy, {})).rejects.toThrow(
      /^GATEWAY_UPSTREAM_URL must be set \(the upstream's streamable-HTTP URL\)$/,
    );
    await expect(gatewayToolsModule(policy, { GATEWAY_UPSTREAM_URL: 'https://vendor.example.com/mcp', TABLE_NAME: 't' })).rejects.toThrow(
      /^GATEWAY_CREDENTIALS_SECRET_ARN must be set \(the gateway's upstream credentials\)$/,
    );
  });
});
