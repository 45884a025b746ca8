import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { App, CfnElement, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { settingsFromContext } from '../../reference/cdk/context';
import { IdempotentMcpStack } from '../../reference/cdk/idempotent-mcp-stack';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { builtThisRun, oncePerRun } from '../support/once-per-run';

/** The context of cdk.json (feature flags and defaults): tests build the stack exactly as `cdk synth` does. */
export const cdkJsonContext: Record<string, unknown> = JSON.parse(readFileSync(join(PROJECT_ROOT, 'cdk.json'), 'utf8')).context;

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
  statements.flatMap(actionsOf).filter((a) => a.startsWith(`${service}:`)).sort();

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
  for (const name of readdirSync(example)) if (name !== 'tsconfig.json' && name !== 'node_modules') cpSync(join(example, name), join(dir, name), { recursive: true });
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: relative(dir, join(PROJECT_ROOT, 'tsconfig.json')), include: ['*.ts'] }));
  return { dir, file: (name) => join(dir, name), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The environment of a machine with no AWS account: no credentials, no instance metadata, and no Docker. */
export function offlineEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('AWS_') && !key.startsWith('CDK_')) env[key] = value;
  return {
    ...env,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
    AWS_CONFIG_FILE: '/nonexistent/config',
    // Any attempt to bundle in a container would run this and fail.
    CDK_DOCKER: '/nonexistent/docker',
    ...extra,
  };
}

/**
 * examples/cdk-app synthesized by its own app as a team runs it (`tsx app.ts` in teamProject(), offline, every
 * function bundled by the local esbuild, nag included) into `outdir`; returns what the app printed. The synth runs
 * once per test run (oncePerRun): test/cdk/team-app.test.ts reads the assembly and test/artifact/team-app.test.ts
 * deploys it, and each gets its own copy.
 */
export async function synthTeamApp(outdir: string): Promise<{ stdout: string }> {
  const shared = await oncePerRun('team-app', async (dir) => {
    const project = teamProject();
    try {
      const tsx = join(PROJECT_ROOT, 'node_modules/.bin/tsx');
      const { stdout } = await promisify(execFile)(tsx, ['app.ts'], { cwd: project.dir, env: offlineEnv({ CDK_OUTDIR: join(dir, 'cdk.out') }), timeout: 400_000, maxBuffer: 16 * 1024 * 1024 }).catch(
        (err: { stdout?: string; stderr?: string; message: string }) => {
          throw new Error(`the team's app did not synthesize: ${err.message.split('\n')[0]}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
        },
      );
      writeFileSync(join(dir, 'stdout.txt'), stdout);
    } finally {
      project.remove();
    }
  });
  cpSync(join(shared, 'cdk.out'), outdir, { recursive: true });
  return { stdout: readFileSync(join(shared, 'stdout.txt'), 'utf8') };
}

/**
 * `npm run synth` as a user runs it (the real CLI, offline, every function bundled by the local esbuild, nag
 * included), once per test run (oncePerRun) into a fresh cloud assembly: test/cdk/synth.test.ts checks what it
 * printed and wrote, test/artifact/reference-stack.test.ts takes its bundles (finishedReferenceSynth). Read it, never
 * write it.
 */
const REFERENCE_SYNTH = 'reference-synth';

export async function referenceSynth(): Promise<{ outdir: string; stderr: string }> {
  const shared = await oncePerRun(REFERENCE_SYNTH, async (dir) => {
    const { stderr } = await promisify(execFile)('npm', ['run', 'synth', '--', '--output', join(dir, 'cdk.out')], { cwd: PROJECT_ROOT, env: offlineEnv(), timeout: 240_000, maxBuffer: 16 * 1024 * 1024 });
    writeFileSync(join(dir, 'stderr.txt'), stderr);
  });
  return { outdir: join(shared, 'cdk.out'), stderr: readFileSync(join(shared, 'stderr.txt'), 'utf8') };
}

/**
 * The bundles (`asset.<hash>` folders) of a cloud assembly copied into another one's folder before its synth: a
 * function whose sources hash the same (lib/bundling.ts, lambdaBuild) finds its bundle staged and is not bundled
 * again; any other is bundled as usual. Returns the hashes copied.
 */
export function stageBundlesFrom(assembly: string, outdir: string): string[] {
  const copied: string[] = [];
  for (const name of readdirSync(assembly)) {
    if (!name.startsWith('asset.') || existsSync(join(outdir, name))) continue;
    cpSync(join(assembly, name), join(outdir, name), { recursive: true });
    copied.push(name.slice('asset.'.length));
  }
  return copied;
}

/**
 * The cloud assembly of this run's `npm run synth` if it has finished, else undefined: a file that would otherwise
 * bundle the same functions itself takes its bundles when they are there, and does not wait for them (waiting would
 * idle its worker for as long as bundling takes).
 */
export function finishedReferenceSynth(): string | undefined {
  const shared = builtThisRun(REFERENCE_SYNTH);
  return shared && join(shared, 'cdk.out');
}
