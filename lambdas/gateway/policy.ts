import * as z from 'zod';
import { quotedText } from '../core/display-text';
import { TOOL_NAME_PATTERN } from '../core/idempotency-key';

/**
 * The gateway's policy file, pure: its schema (zod), its checks (at start, and at synth by the construct), and the
 * approval summary filled from a call. No I/O here. A lookup filled from a call and its answer judged are
 * lambdas/gateway/lookup.ts's.
 *
 * Every mistake is one sentence naming the tool and the field, so a person fixes the file without reading code.
 */

/**
 * A value that may name the call: `"{{path}}"`, `"{{edits.0.newText}}"` (a dotted path into the call's arguments),
 * `"{{$key}}"` (the key the call ran under). A string that is exactly one placeholder takes the value as it is (an
 * array stays an array); elsewhere placeholders are replaced by text.
 */
const templateValue: z.ZodType<unknown> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(templateValue), z.record(z.string(), templateValue)]),
);

/** A condition on a lookup's answer; every condition given must hold. */
const lookupRule = z.strictObject({
  /** The answer's text (its text blocks joined by newlines) is exactly this. */
  textEquals: z.string().optional(),
  /** The answer's text contains this. */
  textIncludes: z.string().optional(),
  /** A field of the answer's structured content (dotted path) equals this value. */
  structured: z.strictObject({ field: z.string().min(1), equals: templateValue }).optional(),
  /** Whether the upstream answered with `isError`. Default false: a rule matches only a normal answer unless it says so. */
  isError: z.boolean().optional(),
});

/** A lookup: the gateway's reconcile field, and `idempotent-mcp check`'s way to count a write's effects. */
export const lookupSchema = z.strictObject({
  /** The upstream's read tool that says whether the write took effect. */
  tool: z.string().regex(TOOL_NAME_PATTERN, 'must be a tool name'),
  /** Its arguments, built from the call (templates). */
  arguments: z.record(z.string(), templateValue),
  /** When the lookup's answer shows the write's effect. */
  found: lookupRule,
  /** When it shows that the write did not happen. Default: any answer without isError that is not `found`. */
  absent: lookupRule.optional(),
});

const keySchema = z.union([
  z.literal('idempotency_key'),
  z.literal('operation_id'),
  z.strictObject({
    /** An argument of the upstream tool that already is a business key: passed through as is. */
    argument: z.string().min(1),
  }),
]);

const writeSchema = z.strictObject({
  kind: z.literal('write'),
  /** Default `idempotency_key`: an argument the gateway adds and removes before calling the upstream. */
  key: keySchema.optional(),
  /** Arguments left out of the fingerprint (trace ids): they may differ between retries of one intent. */
  fingerprint: z.strictObject({ exclude: z.array(z.string().min(1)) }).optional(),
  /** How long one upstream call may take before its outcome counts as unknown. Default 10000. */
  timeoutMs: z.number().int().min(100).max(900_000).optional(),
  /**
   * Required: how long after the gateway gave up on a call the upstream may still apply it. The gateway cannot know
   * it; until it has passed, a lookup that finds nothing decides nothing.
   */
  inFlightWindowMs: z.number().int().min(0).max(86_400_000),
  /** `approval`: a person approves each operation on the gateway's approval page before it is sent. */
  confirmation: z.enum(['none', 'approval']).optional(),
  /** What the person is asked (a template); default the tool's name and its arguments. */
  summary: z.string().min(1).max(500).optional(),
  /** How the reconciler learns what became of a call whose answer was lost. Without it, such calls wait for a person. */
  reconcile: lookupSchema.optional(),
  /** How long a retry replays the first answer. Default 24 h. */
  retentionSeconds: z.number().int().min(60).optional(),
});

const readSchema = z.strictObject({ kind: z.literal('read') });

const toolPolicySchema = z.discriminatedUnion('kind', [writeSchema, readSchema]);

/**
 * The tools by name as a Map, so that only the names the file gives exist: on a plain object `toString`,
 * `constructor` or `__proto__` would be found on its prototype (or, for `__proto__`, replace it) and an upstream tool
 * of that name would be served though the file never named it. The file's own keys are read with Object.entries
 * (JSON.parse makes `"__proto__"` an own key like any other).
 */
const asMap = (value: unknown): unknown =>
  value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Map) ? new Map(Object.entries(value)) : value;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const gatewayPolicySchema = z.strictObject({
  $schema: z.string().optional(),
  /**
   * Environment variables of a stdio upstream's process (a local gateway), for every tenant; a tenant's `env`
   * credential adds to them. The process gets these and HOME, PATH, SHELL, TERM (and the like, MCP SDK's default),
   * nothing else of the gateway's own environment.
   */
  env: z
    .preprocess(
      asMap,
      z.map(z.string().regex(ENV_NAME, 'must be an environment variable name'), z.string(), {
        error: 'must be an object of variable names and their values',
      }),
    )
    .optional(),
  /** Per upstream tool. A tool the upstream lists and this file does not name is not served (fail closed). */
  tools: z.preprocess(asMap, z.map(z.string(), toolPolicySchema, { error: 'must be an object' })),
});

export type GatewayPolicy = z.output<typeof gatewayPolicySchema>;
type ToolPolicy = z.output<typeof toolPolicySchema>;
export type WritePolicy = z.output<typeof writeSchema>;
export type LookupPolicy = z.output<typeof lookupSchema>;
export type LookupRule = z.output<typeof lookupRule>;

/** The arguments the gateway itself adds to a write tool: an upstream argument of the same name cannot be served. */
const GATEWAY_ARGUMENTS = ['idempotency_key', 'operation_id', 'trace_id'] as const;
export const DEFAULT_TIMEOUT_MS = 10_000;

export class GatewayPolicyError extends Error {
  constructor(readonly mistakes: readonly string[]) {
    super(
      `The gateway policy has ${mistakes.length === 1 ? 'a mistake' : `${mistakes.length} mistakes`}:\n${mistakes.map((m) => `- ${m}`).join('\n')}`,
    );
    this.name = 'GatewayPolicyError';
  }
}

/** The value of an object's own property (never one of Object.prototype's), or undefined. */
const own = (object: unknown, name: string): unknown =>
  object !== null && typeof object === 'object' && Object.hasOwn(object, name) ? (object as Record<string, unknown>)[name] : undefined;

const FIELD_NAMES = new Map<string, readonly string[]>([
  ['write', Object.keys(writeSchema.shape)],
  ['read', Object.keys(readSchema.shape)],
]);

/** One sentence for one zod issue, naming the tool and the field. */
function sentence(issue: z.core.$ZodIssue, input: unknown): string {
  const [top, tool, ...field] = issue.path.map(String);
  if (top !== 'tools' || tool === undefined) {
    if (issue.code === 'unrecognized_keys')
      return `the file has unknown field(s) ${issue.keys.join(', ')}: it takes "tools" (and "env", "$schema")`;
    if (top === 'env') return `the file: env${tool === undefined ? '' : ` ${tool}`}: ${issue.message}`;
    return `the file: ${top ?? 'its top level'} ${issue.message.toLowerCase()} (it must be an object with "tools": { "<upstream tool>": { "kind": "write" | "read", ... } })`;
  }
  const where = `tool ${tool}`;
  const kind = own(own(own(input, 'tools'), tool), 'kind');
  if (issue.code === 'invalid_union' && (field.length === 0 || field.join('.') === 'kind'))
    return `${where}: field kind must be "write" or "read"`;
  if (issue.code === 'unrecognized_keys') {
    const path = field.length > 0 ? `${field.join('.')}.` : '';
    const known = field.length === 0 && typeof kind === 'string' ? FIELD_NAMES.get(kind) : undefined;
    return `${where}: unknown field ${issue.keys.map((key) => path + key).join(', ')}${known ? ` (a ${kind} tool takes ${known.join(', ')})` : ''}`;
  }
  const name = field.join('.') || 'kind';
  // zod leaves the input out of its issues: the file itself says whether the field is missing or of the wrong type.
  if (issue.code === 'invalid_type' && issue.path.reduce<unknown>((value, part) => own(value, String(part)), input) === undefined)
    return `${where}: field ${name} is required${name === 'inFlightWindowMs' ? ' (how long the upstream may still apply a call after the gateway gave up on it, in ms)' : ''}`;
  return `${where}: field ${name}: ${issue.message}`;
}

/** A template's placeholder, `{{path}}`, its path captured. */
export const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const PATH = /^(\$key|[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*)$/;

/** The placeholders of a template value, in order. */
function placeholders(value: unknown): string[] {
  if (typeof value === 'string') return [...value.matchAll(PLACEHOLDER)].map((match) => match[1]!);
  if (Array.isArray(value)) return value.flatMap(placeholders);
  if (value && typeof value === 'object') return Object.values(value).flatMap(placeholders);
  return [];
}

/**
 * A write entry as far as its fields parse: a field that fails the schema is left out (its own sentence says why),
 * so that the checks below still run on the others and one run names every mistake of the tool.
 */
type CheckedWrite = Partial<Omit<WritePolicy, 'reconcile'>> & { kind: 'write'; reconcile?: Partial<LookupPolicy> };

/** The fields of `value` that parse with their own schema in `shape`; undefined when it is not an object. */
function fieldsThatParse(shape: Record<string, z.ZodType>, value: unknown): Record<string, unknown> | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const fields: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(shape)) {
    const field = own(value, name);
    if (field === undefined) continue;
    if (schema === writeSchema.shape.reconcile) {
      const lookup = fieldsThatParse(lookupSchema.shape, field);
      if (lookup) fields[name] = lookup;
      continue;
    }
    const parsed = schema.safeParse(field);
    if (parsed.success) fields[name] = parsed.data;
  }
  return fields;
}

/** The templates of a write policy, by field (for the checks). */
function templatesOf(policy: CheckedWrite): Array<[string, unknown]> {
  const list: Array<[string, unknown]> = [];
  if (policy.summary !== undefined) list.push(['summary', policy.summary]);
  const lookup = policy.reconcile;
  if (lookup) {
    list.push(['reconcile.arguments', lookup.arguments]);
    for (const rule of ['found', 'absent'] as const) {
      const value = lookup[rule];
      if (!value) continue;
      if (value.textEquals !== undefined) list.push([`reconcile.${rule}.textEquals`, value.textEquals]);
      if (value.textIncludes !== undefined) list.push([`reconcile.${rule}.textIncludes`, value.textIncludes]);
      if (value.structured) list.push([`reconcile.${rule}.structured.equals`, value.structured.equals]);
    }
  }
  return list;
}

/** A found/absent rule with no condition: it would match any answer (the gateway's policy and the check refuse it). */
export function emptyLookupRule(rule: LookupRule): boolean {
  return rule.textEquals === undefined && rule.textIncludes === undefined && rule.structured === undefined && rule.isError === undefined;
}

/**
 * The policy file's content checked on its own (no upstream needed: the construct runs this at synth): every mistake,
 * one sentence each, and the policy of the tools that have none (the start checks those against the upstream too, so
 * that one run names every mistake).
 */
export function checkGatewayPolicy(input: unknown): { policy: GatewayPolicy; mistakes: string[] } {
  const parsed = gatewayPolicySchema.safeParse(input);
  const mistakes = parsed.success ? [] : [...new Set(parsed.error.issues.map((issue) => sentence(issue, input)))];
  const raw = asMap(own(input, 'tools'));
  const rawTools = raw instanceof Map ? (raw as Map<string, unknown>) : new Map<string, unknown>();
  const tools = new Map<string, ToolPolicy>();
  // Every tool is checked further, and a write whose entry fails the schema too, on the fields that parse: a mistake
  // in one field never hides another's.
  const checked: Array<[string, ToolPolicy | CheckedWrite]> = [];
  for (const [name, value] of rawTools) {
    const entry = toolPolicySchema.safeParse(value);
    if (entry.success) {
      tools.set(name, entry.data);
      checked.push([name, entry.data]);
    } else if (own(value, 'kind') === 'write') checked.push([name, { ...fieldsThatParse(writeSchema.shape, value), kind: 'write' }]);
    else checked.push([name, { kind: 'read' }]);
  }
  if (raw instanceof Map && raw.size === 0)
    mistakes.push('the file names no tool: add "tools": { "<upstream tool>": { "kind": "write" | "read", ... } }');
  for (const [tool, entry] of checked) {
    if (!TOOL_NAME_PATTERN.test(tool))
      mistakes.push(`tool ${tool.slice(0, 64)}: the name is not an MCP tool name (letters, digits, _ - . only)`);
    if (entry.kind !== 'write') continue;
    for (const [field, value] of templatesOf(entry))
      for (const path of placeholders(value)) {
        if (!PATH.test(path))
          mistakes.push(`tool ${tool}: field ${field}: {{${path}}} is not an argument path (write {{name}}, {{name.0.field}} or {{$key}})`);
        // The summary is built from the call's arguments alone (the key is not one of them): {{$key}} would show blank.
        else if (field === 'summary' && path === '$key')
          mistakes.push(
            `tool ${tool}: field summary: {{$key}} cannot be shown in a summary (the person approves the arguments: name them, {{name}})`,
          );
      }
    const lookup = entry.reconcile;
    if (lookup?.found && emptyLookupRule(lookup.found))
      mistakes.push(
        `tool ${tool}: field reconcile.found is empty: say what in the lookup's answer shows the effect (textEquals, textIncludes, structured)`,
      );
    // The reconciler calls the lookup again and again, unkeyed: a write there would run once per check.
    if (lookup?.tool !== undefined) {
      const kind = own(rawTools.get(lookup.tool), 'kind');
      if (!rawTools.has(lookup.tool))
        mistakes.push(
          `tool ${tool}: field reconcile.tool: the policy does not name ${lookup.tool}; the lookup must be a read the policy names ("${lookup.tool}": { "kind": "read" })`,
        );
      else if (kind === 'write')
        mistakes.push(
          `tool ${tool}: field reconcile.tool: ${lookup.tool} is a write in this policy; the lookup must be a read (the reconciler calls it unkeyed, as often as it checks)`,
        );
    }
    if (typeof entry.key === 'object' && entry.fingerprint?.exclude.includes(entry.key.argument))
      mistakes.push(
        `tool ${tool}: field fingerprint.exclude names the key argument ${entry.key.argument}: the key is never part of the fingerprint`,
      );
    // The person's approval is bound to the fingerprint: an excluded argument could be changed after the approval and
    // still be sent. The gateway's own trace_id (never sent upstream) is the way to correlate such calls.
    if (entry.confirmation === 'approval' && (entry.fingerprint?.exclude.length ?? 0) > 0)
      mistakes.push(
        `tool ${tool}: field fingerprint.exclude cannot be used with confirmation "approval": the person approves the arguments, and an excluded one (${entry.fingerprint!.exclude.join(', ')}) could differ in what is sent; remove it from exclude`,
      );
  }
  return { policy: parsed.success ? parsed.data : { tools }, mistakes: [...new Set(mistakes)] };
}

/**
 * The policy file's content, checked on its own (no upstream needed: the construct runs this at synth). Throws a
 * GatewayPolicyError listing every mistake, one sentence each.
 */
export function parseGatewayPolicy(input: unknown): GatewayPolicy {
  const { policy, mistakes } = checkGatewayPolicy(input);
  if (mistakes.length > 0) throw new GatewayPolicyError(mistakes);
  return policy;
}

/** What the gateway needs to know of an upstream tool (its `tools/list` entry). */
export interface UpstreamToolInfo {
  name: string;
  inputSchema: { type?: unknown; properties?: Record<string, unknown>; required?: readonly string[] };
}

/**
 * The policy against the upstream's `tools/list`, at start: every tool it names exists upstream, the key and the
 * excluded fields are arguments of the tool, the lookup tool exists and its arguments are its own, and the
 * templates name arguments of the call. Returns the mistakes (empty: fine).
 */
export function checkPolicyAgainstUpstream(policy: GatewayPolicy, upstream: readonly UpstreamToolInfo[]): string[] {
  const byName = new Map(upstream.map((tool) => [tool.name, tool]));
  const listed = [...byName.keys()].sort().join(', ') || 'none';
  const mistakes: string[] = [];
  for (const [name, entry] of policy.tools) {
    const tool = byName.get(name);
    if (!tool) {
      mistakes.push(`tool ${name}: the upstream lists no tool of that name (it lists ${listed})`);
      continue;
    }
    if (entry.kind !== 'write') continue;
    const properties = tool.inputSchema.properties ?? {};
    const args = Object.keys(properties);
    const required = new Set(tool.inputSchema.required ?? []);
    const key = entry.key ?? 'idempotency_key';
    if (typeof key === 'object') {
      const schema = own(properties, key.argument) as { type?: unknown } | undefined;
      if (!schema)
        mistakes.push(
          `tool ${name}: field key.argument: the upstream tool has no argument ${key.argument} (it has ${args.join(', ') || 'none'})`,
        );
      else if (!required.has(key.argument))
        mistakes.push(`tool ${name}: field key.argument: ${key.argument} is optional upstream, and a business key must be in every call`);
      else if (schema.type !== 'string')
        mistakes.push(`tool ${name}: field key.argument: ${key.argument} is not a string argument upstream`);
    }
    for (const argument of GATEWAY_ARGUMENTS)
      if (Object.hasOwn(properties, argument) && !(typeof key === 'object' && key.argument === argument))
        mistakes.push(
          `tool ${name}: the upstream tool has its own argument ${argument}, which the gateway adds: name it as the key ({ "argument": "${argument}" }) or leave the tool out`,
        );
    for (const field of entry.fingerprint?.exclude ?? [])
      if (!Object.hasOwn(properties, field))
        mistakes.push(`tool ${name}: field fingerprint.exclude: the upstream tool has no argument ${field}`);
    for (const [field, value] of templatesOf(entry))
      for (const path of placeholders(value)) {
        const root = path.split('.')[0]!;
        if (root !== '$key' && !Object.hasOwn(properties, root))
          mistakes.push(`tool ${name}: field ${field}: {{${path}}} names no argument of ${name} (it has ${args.join(', ') || 'none'})`);
      }
    const lookup = entry.reconcile;
    if (lookup) {
      const reader = byName.get(lookup.tool);
      if (!reader) mistakes.push(`tool ${name}: field reconcile.tool: the upstream lists no tool ${lookup.tool} (it lists ${listed})`);
      else {
        const readerArgs = reader.inputSchema.properties ?? {};
        for (const arg of Object.keys(lookup.arguments))
          if (!Object.hasOwn(readerArgs, arg))
            mistakes.push(
              `tool ${name}: field reconcile.arguments: ${lookup.tool} has no argument ${arg} (it has ${Object.keys(readerArgs).join(', ') || 'none'})`,
            );
        for (const arg of reader.inputSchema.required ?? [])
          if (!Object.hasOwn(lookup.arguments, arg))
            mistakes.push(`tool ${name}: field reconcile.arguments: ${lookup.tool} requires ${arg}, which is not given`);
      }
    }
  }
  return mistakes;
}

/** The value at a dotted path of the call (`edits.0.newText`), or undefined. */
export function at(source: unknown, path: string): unknown {
  let value = source;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = own(value, part);
  }
  return value;
}

/**
 * What the person is asked to approve: the summary template with each placeholder replaced by the call's value,
 * quoted as the reference tools quote free text (a string in double quotes with its quotes escaped, anything else
 * as JSON), so the agent's text cannot close its quote and pass for more of the summary. Undefined when a
 * placeholder names nothing in the call.
 */
export function fillSummary(template: string, args: Record<string, unknown>): string | undefined {
  let missing = false;
  const text = template.replace(PLACEHOLDER, (_, path: string) => {
    const value = at(args, path);
    if (value === undefined) missing = true;
    return typeof value === 'string' ? quotedText(value) : JSON.stringify(value);
  });
  return missing ? undefined : text;
}
