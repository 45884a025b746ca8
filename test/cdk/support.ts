import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { App, CfnElement, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { settingsFromContext } from '../../reference/cdk/context';
import { IdempotentMcpStack } from '../../reference/cdk/idempotent-mcp-stack';
import type { ApprovalPageApi } from '../../lib/constructs/approval-page';
import type { Auth } from '../../lib/constructs/auth';
import type { McpFunction } from '../../lib/constructs/mcp-function';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import type { IdempotentMcpEndpoint } from '../../lib/endpoint';
import { exampleRun, offlineEnv } from '../package/support';
import { oncePerRun } from '../support/once-per-run';

/** The context of cdk.json (feature flags and defaults): tests build the stack exactly as `cdk synth` does. */
export const cdkJsonContext: Record<string, unknown> = JSON.parse(readFileSync(join(PROJECT_ROOT, 'cdk.json'), 'utf8')).context;

/**
 * The endpoint's own parts behind its public members (internal constructs, by their construct ids): what a test
 * reads beside the template, such as the logical id of the approval page's client.
 */
export function partsOf(endpoint: IdempotentMcpEndpoint) {
  const child = <T>(id: string) => endpoint.node.tryFindChild(id) as T | undefined;
  return {
    auth: child<Auth>('Auth')!,
    mcp: child<McpFunction>('Mcp')!,
    approvalPageApi: child<ApprovalPageApi>('ApprovalPage'),
  };
}

export interface SynthOptions {
  /** Run esbuild for every function (slow); by default bundling is skipped: the synth test covers it. */
  bundle?: boolean;
}

/**
 * An app for the tests that read templates: cdk.json's context, bundling skipped unless asked, and without the
 * built-in template validation the CLI runs (its engine costs seconds of CPU per test file). The templates are
 * validated where a team's would be: `npm run synth` (test/cdk/synth.test.ts) and the team's app
 * (test/cdk/team-app.test.ts) run it, and cfn-lint reads both deployed stacks (test/artifact/).
 */
export function templateApp(context: Record<string, unknown> = {}, options: SynthOptions & { outdir?: string } = {}): App {
  return new App({
    context: { ...cdkJsonContext, ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }), ...context },
    builtinCloudFormationValidation: false,
    ...(options.outdir ? { outdir: options.outdir } : {}),
  });
}

/** Builds the app's stack from context (as bin/app.ts does) in a templateApp. */
export function synthStack(context: Record<string, unknown> = {}, options: SynthOptions = {}) {
  const app = templateApp(context, options);
  const settings = settingsFromContext(app.node);
  const stack = new IdempotentMcpStack(app, settings.stackName, settings.props);
  return { app, stack, template: Template.fromStack(stack) };
}

export const logicalId = (construct: { node: { defaultChild?: unknown } } | CfnElement): string => {
  const element = construct instanceof CfnElement ? construct : (construct.node.defaultChild as CfnElement);
  return Stack.of(element).getLogicalId(element);
};

export interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Record<string, unknown>;
}

export const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
export const resourcesOf = (s: Statement): unknown[] => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);

/** Every statement of every policy attached to a role (inline or AWS::IAM::Policy). */
export function statementsOfRole(template: Template, roleLogicalId: string): Statement[] {
  const statements: Statement[] = [];
  const role = template.toJSON().Resources[roleLogicalId];
  for (const policy of role?.Properties?.Policies ?? []) statements.push(...policy.PolicyDocument.Statement);
  for (const resource of Object.values(template.findResources('AWS::IAM::Policy'))) {
    const roles: unknown[] = (resource as { Properties: { Roles?: unknown[] } }).Properties.Roles ?? [];
    if (roles.some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleLogicalId }))) {
      statements.push(...(resource as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument.Statement);
    }
  }
  return statements;
}

/** The actions granted on exactly this resource (a CloudFormation expression compared structurally). */
export function actionsOn(statements: Statement[], resource: unknown): string[] {
  const key = JSON.stringify(resource);
  return statements
    .filter((s) => s.Effect === 'Allow' && resourcesOf(s).some((r) => JSON.stringify(r) === key))
    .flatMap(actionsOf)
    .sort();
}

/** The actions of one service prefix, over all resources. */
export const serviceActions = (statements: Statement[], service: string) =>
  statements
    .flatMap(actionsOf)
    .filter((a) => a.startsWith(`${service}:`))
    .sort();

/**
 * A copy of examples/cdk-app as a team's project inside this repository (so its packages resolve from here), with
 * a tsconfig that maps the `idempotent-mcp/*` subpaths to the sources, for tsx and esbuild alike. The example's own
 * tsconfig resolves them from the installed package instead (test/package/pack.test.ts runs it that way).
 */
export function teamProject(): { dir: string; file: (name: string) => string; remove: () => void } {
  const scratch = join(PROJECT_ROOT, '.scratch');
  mkdirSync(scratch, { recursive: true });
  const dir = mkdtempSync(join(scratch, 'team-app-'));
  const example = join(PROJECT_ROOT, 'examples/cdk-app');
  for (const name of readdirSync(example))
    if (name !== 'tsconfig.json' && name !== 'node_modules') cpSync(join(example, name), join(dir, name), { recursive: true });
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ extends: relative(dir, join(PROJECT_ROOT, 'tsconfig.json')), include: ['*.ts'] }),
  );
  return { dir, file: (name) => join(dir, name), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * examples/cdk-app as a team has it (the packed package installed as docs/toolkit.md says), synthesized by its own
 * app (`tsx app.ts`, offline, every function bundled by the local esbuild, nag included), copied into `outdir`;
 * returns what the app printed. The synth is the run's one of that example (exampleRun, test/package/support.ts):
 * test/package/pack.test.ts checks what it printed, test/cdk/team-app.test.ts reads the assembly and
 * test/artifact/team-app.test.ts deploys it, each from its own copy.
 */
export async function synthTeamApp(outdir: string): Promise<{ stdout: string }> {
  const { stdout, cloudAssembly } = await exampleRun('cdk-app');
  cpSync(cloudAssembly, outdir, { recursive: true });
  return { stdout };
}

/**
 * `npm run synth` as a user runs it (the real CLI, offline, every function bundled by the local esbuild, nag
 * included), once per test run (oncePerRun) into a fresh cloud assembly: test/cdk/synth.test.ts checks what it
 * printed and wrote. Read it, never write it.
 */
const REFERENCE_SYNTH = 'reference-synth';

export async function referenceSynth(): Promise<{ outdir: string; stderr: string }> {
  const shared = await oncePerRun(REFERENCE_SYNTH, async (dir) => {
    const { stderr } = await promisify(execFile)('npm', ['run', 'synth', '--', '--output', join(dir, 'cdk.out')], {
      cwd: PROJECT_ROOT,
      env: offlineEnv(),
      timeout: 240_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    writeFileSync(join(dir, 'stderr.txt'), stderr);
  });
  return { outdir: join(shared, 'cdk.out'), stderr: readFileSync(join(shared, 'stderr.txt'), 'utf8') };
}
