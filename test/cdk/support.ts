import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, CfnElement, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { settingsFromContext } from '../../reference/cdk/context';
import { IdempotentMcpStack } from '../../reference/cdk/idempotent-mcp-stack';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/** The context of cdk.json (feature flags and defaults): tests build the stack exactly as `cdk synth` does. */
export const cdkJsonContext: Record<string, unknown> = JSON.parse(readFileSync(join(PROJECT_ROOT, 'cdk.json'), 'utf8')).context;

export interface SynthOptions {
  /** Run esbuild for every function (slow); by default bundling is skipped: the synth test covers it. */
  bundle?: boolean;
}

/** Builds the app's stack from context (as bin/app.ts does) without the built-in template validation the CLI runs. */
export function synthStack(context: Record<string, unknown> = {}, options: SynthOptions = {}) {
  const app = new App({
    context: { ...cdkJsonContext, ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }), ...context },
    builtinCloudFormationValidation: false,
  });
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
