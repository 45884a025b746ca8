import * as z from 'zod';
import type { Tool } from '@modelcontextprotocol/client';
import { emptyLookupRule, lookupSchema, type LookupPolicy } from '../gateway/policy';

/**
 * `idempotent-mcp check --config <file>`: the write tools to check, how to build a fresh call's arguments, and how
 * to count its effects. Templates are the gateway policy's: `{{$key}}` is the fresh key of the scenario, `{{path}}`
 * a value of the call's arguments; `count` is the policy's lookup (docs/check.md).
 */
const template = z.record(z.string(), z.unknown());
const callSchema = z.strictObject({ tool: z.string().min(1), arguments: template });

const toolSchema = z.strictObject({
  /** The arguments of a fresh call; `{{$key}}` makes them unique per scenario. */
  arguments: template,
  /** The same key with other arguments (scenario other-arguments); without it that scenario is not run. */
  otherArguments: template.optional(),
  /** Calls made before each scenario (a file an edit needs), not counted. */
  prepare: z.array(callSchema).optional(),
  /** A read tool and its found/absent rule; a textIncludes rule counts each occurrence in the answer. */
  count: lookupSchema.optional(),
});

const configSchema = z.strictObject({ $schema: z.string().optional(), tools: z.record(z.string(), toolSchema) });

/** One write tool as the check calls it. */
export interface ToolPlan {
  tool: string;
  arguments: Record<string, unknown>;
  otherArguments?: Record<string, unknown>;
  prepare: ReadonlyArray<{ tool: string; arguments: Record<string, unknown> }>;
  count?: LookupPolicy;
}

export class CheckUsageError extends Error {
  override name = 'CheckUsageError';
}

/** The config file's content against the server's tools: one sentence for the first mistake. */
export function planFromConfig(input: unknown, origin: string, tools: readonly Tool[]): ToolPlan[] {
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new CheckUsageError(`${origin}: ${issue.path.join('.') || 'the file'}: ${issue.message}`);
  }
  const names = new Set(tools.map((tool) => tool.name));
  const listed = [...names].sort().join(', ') || 'none';
  const plans: ToolPlan[] = [];
  for (const [tool, entry] of Object.entries(parsed.data.tools)) {
    for (const name of [tool, ...(entry.prepare ?? []).map((call) => call.tool), ...(entry.count ? [entry.count.tool] : [])])
      if (!names.has(name)) throw new CheckUsageError(`${origin}: tool ${tool}: the server lists no tool ${name} (it lists ${listed})`);
    // The gateway policy's rules for its lookup, as the check reads the same lookup.
    if (entry.count && emptyLookupRule(entry.count.found))
      throw new CheckUsageError(
        `${origin}: tool ${tool}: count.found is empty: say what in the lookup's answer shows the effect (textEquals, textIncludes, structured)`,
      );
    // The lookup runs after every scenario: a write there would make effects of its own.
    if (entry.count && entry.count.tool in parsed.data.tools)
      throw new CheckUsageError(
        `${origin}: tool ${tool}: count.tool ${entry.count.tool} is a write this config checks; the lookup must be a read tool`,
      );
    plans.push({
      tool,
      arguments: entry.arguments,
      ...(entry.otherArguments ? { otherArguments: entry.otherArguments } : {}),
      prepare: entry.prepare ?? [],
      ...(entry.count ? { count: entry.count } : {}),
    });
  }
  if (plans.length === 0)
    throw new CheckUsageError(`${origin}: it names no tool: add "tools": { "<write tool>": { "arguments": { ... } } }`);
  return plans;
}

/** A value for each required argument of a schema, strings made unique with the key. */
function sample(schema: Record<string, unknown> | undefined, name: string): unknown {
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return schema.enum[0];
  switch (schema?.type) {
    case 'number':
    case 'integer':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
      return sampleArguments(schema);
    default:
      return `check-${name}-{{$key}}`;
  }
}

function sampleArguments(schema: { properties?: unknown; required?: unknown } | undefined): Record<string, unknown> {
  const properties = (schema?.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = Array.isArray(schema?.required) ? (schema.required as string[]) : [];
  return Object.fromEntries(required.map((name) => [name, sample(properties[name], name)]));
}

/**
 * Without a config: the tools whose annotations do not say read-only are writes, called with a value for each
 * required argument; their effects cannot be counted (no lookup).
 */
export function planFromAnnotations(tools: readonly Tool[]): ToolPlan[] {
  return tools
    .filter((tool) => tool.annotations?.readOnlyHint !== true)
    .map((tool) => ({ tool: tool.name, arguments: sampleArguments(tool.inputSchema), prepare: [] }));
}
