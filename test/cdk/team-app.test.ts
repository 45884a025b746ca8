import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReferenceEnvVars } from '../../reference/config';
import { tools as referenceTools } from '../../reference/tools/index';
import { StackOutput } from '../../lib/stack-outputs';
import { synthTeamApp } from './support';

/** Every endpoint serves these (issue 21 item 3): they are the toolkit's, not the reference endpoint's. */
const TOOLKIT_TOOLS = new Set(['get_operation_status', 'issue_operation_id']);
/** The reference endpoint's demo tools, by name. */
const DEMO_TOOLS = referenceTools.map((tool) => tool.name).filter((name) => !TOOLKIT_TOOLS.has(name));
/** The reference endpoint's settings (payments, tickets, mailbox, email, sandbox), by variable name. */
const REFERENCE_VARIABLES = Object.values(ReferenceEnvVars).map((variable) => variable.name);

/**
 * A team's endpoint is the team's only: examples/cdk-app (what a stranger writes from docs/toolkit.md) synthesized
 * as its own app does it (`tsx app.ts`, nag included, every function bundled by the local esbuild), then its
 * template and its four bundles searched for anything of the reference endpoint.
 */
describe("a team's CDK app (examples/cdk-app) carries nothing of the reference endpoint", () => {
  const outdir = mkdtempSync(join(tmpdir(), 'team-app-'));
  let template: { Resources: Record<string, { Type: string; Properties?: any }> };
  let templateText: string;
  const bundles: string[] = [];

  beforeAll(async () => {
    const { stdout } = await synthTeamApp(outdir);
    expect(stdout).toMatch(/synth passed, cdk-nag clean: 4 functions/);
    templateText = readFileSync(join(outdir, 'MyTeamEndpoint.template.json'), 'utf8');
    template = JSON.parse(templateText);
    const assets = JSON.parse(readFileSync(join(outdir, 'MyTeamEndpoint.assets.json'), 'utf8')).files;
    for (const fn of Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function')) {
      const hash = fn.Properties.Code.S3Key.replace(/\.zip$/, '');
      bundles.push(readFileSync(join(outdir, assets[hash].source.path, 'index.mjs'), 'utf8'));
    }
  }, 420_000);
  afterAll(() => {
    rmSync(outdir, { recursive: true, force: true });
  });

  it('knows what to look for: the demo tools and the reference settings', () => {
    expect(DEMO_TOOLS).toEqual(expect.arrayContaining(['create_order', 'send_email', 'create_ticket', 'request_payment']));
    expect(REFERENCE_VARIABLES).toEqual(
      expect.arrayContaining(['PAYMENTS_URL', 'TICKETS_URL', 'MAILBOX_URL', 'EMAIL_FROM', 'SANDBOX_TABLE_NAME']),
    );
  });

  it("gives its functions only the endpoint's variables and the team's, none of the reference endpoint's", () => {
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    expect(functions).toHaveLength(4);
    const names = functions.flatMap((fn) => Object.keys(fn.Properties.Environment?.Variables ?? {}));
    expect(names).toContain('ROOMS_CHAT_WEBHOOK');
    expect(names.filter((name) => REFERENCE_VARIABLES.includes(name) || /^(EMAIL|SANDBOX)_/.test(name))).toEqual([]);
    for (const name of REFERENCE_VARIABLES) expect(templateText, name).not.toContain(name);
  });

  it('has no sandbox resources and no demo tool names in its template', () => {
    expect(Object.keys(template.Resources).filter((id) => /sandbox/i.test(id))).toEqual([]);
    for (const name of DEMO_TOOLS) expect(templateText, name).not.toContain(name);
  });

  it("bundles the team's tools and deliveries, and no demo tool, reference setting or sandbox code", () => {
    expect(bundles).toHaveLength(4);
    expect(bundles.filter((code) => code.includes('rooms.reserve'))).toHaveLength(2); // the MCP function and the reconciler
    expect(bundles.filter((code) => code.includes('room.announce')).length).toBeGreaterThanOrEqual(1); // the consumer delivers it
    for (const code of bundles) {
      for (const name of [...DEMO_TOOLS, ...REFERENCE_VARIABLES]) expect(code.includes(name), name).toBe(false);
      expect(code).not.toMatch(/sandbox/i);
    }
  });

  it('deploys no demo client: no app client with a secret, none for machines at all until the team makes its tenants', () => {
    const clients = Object.entries(template.Resources).filter(([, r]) => r.Type === 'AWS::Cognito::UserPoolClient');
    expect(clients.filter(([id]) => /demo/i.test(id))).toEqual([]);
    expect(
      clients.filter(([, r]) => r.Properties.GenerateSecret === true || r.Properties.AllowedOAuthFlows?.includes('client_credentials')),
    ).toEqual([]);
    // Only the approval page's client for people remains (code grant, no secret).
    expect(clients.map(([, r]) => r.Properties.AllowedOAuthFlows)).toEqual([['code']]);
  });

  it('outputs what a team needs to get a token, reach the endpoint and run the review tool (docs/deploy.md)', () => {
    const outputs = (template as unknown as { Outputs: Record<string, { Value: unknown }> }).Outputs;
    for (const name of [
      StackOutput.mcpUrl,
      StackOutput.tokenEndpoint,
      StackOutput.tokenScope,
      StackOutput.userPoolId,
      StackOutput.approvalPageUrl,
      StackOutput.table,
      StackOutput.queue,
      StackOutput.deadLetterQueue,
    ])
      expect(outputs, name).toHaveProperty(name);
    // No client made here, so no client id and no secret command.
    expect(outputs).not.toHaveProperty(StackOutput.clientId);
    expect(outputs).not.toHaveProperty(StackOutput.clientSecretCommand);
    expect(outputs[StackOutput.tokenScope]!.Value).toBe('idempotent-mcp/tools');
  });

  it('says at deploy which runtime its functions run on, the one every function of the template has (Node 22)', () => {
    const { Outputs: outputs, Resources: resources } = template as unknown as {
      Outputs: Record<string, { Value: unknown }>;
      Resources: Record<string, { Type: string; Properties: { Runtime?: string } }>;
    };
    const runtimes = new Set(
      Object.values(resources)
        .filter((r) => r.Type === 'AWS::Lambda::Function')
        .map((r) => r.Properties.Runtime),
    );
    expect([...runtimes]).toEqual(['nodejs22.x']);
    expect(outputs[StackOutput.runtime]!.Value).toBe('nodejs22.x');
  });

  it("bundles no development sign-in: neither the dev issuer's page nor its token endpoint (a function never trusts it)", () => {
    for (const code of bundles) {
      expect(code).not.toContain('Local sign-in');
      expect(code).not.toContain('Sign-in refused');
    }
  });

  it('has an outbox because it has deliveries: a queue and its dead-letter queue, a relay on the table stream, a consumer', () => {
    const types = Object.values(template.Resources).map((r) => r.Type);
    expect(types.filter((t) => t === 'AWS::SQS::Queue')).toHaveLength(2);
    expect(types.filter((t) => t === 'AWS::Lambda::EventSourceMapping')).toHaveLength(2);
    const table = Object.values(template.Resources).find((r) => r.Type === 'AWS::DynamoDB::Table')!;
    expect(table.Properties.StreamSpecification).toEqual({ StreamViewType: 'NEW_IMAGE' });
  });
});
