import { at, type LookupPolicy, type LookupRule, PLACEHOLDER } from './policy';

/**
 * A policy's lookup at run time, pure: its templates filled from one call (the gateway before it sends a write,
 * `idempotent-mcp check` for its counts), and its rules read against the lookup tool's answer (the reconciler's
 * verdict). The file's format and its checks are lambdas/gateway/policy.ts's.
 */

/** What a template is filled from: the call's arguments and the key it ran under. */
export interface CallFacts {
  args: Record<string, unknown>;
  key: string;
}

/** A template filled from a call; undefined when a placeholder names nothing in the call. */
export function fillTemplate(template: unknown, call: CallFacts): unknown {
  const lookup = (path: string) => (path === '$key' ? call.key : at(call.args, path));
  if (typeof template === 'string') {
    const whole = /^\{\{\s*([^{}]*?)\s*\}\}$/.exec(template);
    if (whole) return lookup(whole[1]!);
    let missing = false;
    const text = template.replace(PLACEHOLDER, (_, path: string) => {
      const value = lookup(path);
      if (value === undefined) missing = true;
      return typeof value === 'string' ? value : JSON.stringify(value);
    });
    return missing ? undefined : text;
  }
  if (Array.isArray(template)) {
    const items = template.map((item) => fillTemplate(item, call));
    return items.includes(undefined) ? undefined : items;
  }
  if (template && typeof template === 'object') {
    const entries = Object.entries(template).map(([name, value]) => [name, fillTemplate(value, call)] as const);
    return entries.some(([, value]) => value === undefined) ? undefined : Object.fromEntries(entries);
  }
  return template;
}

/** A lookup with its templates filled from one call: stored before the call is sent, read by the reconciler. */
export interface PreparedLookup {
  tool: string;
  arguments: Record<string, unknown>;
  found: LookupRule;
  absent?: LookupRule;
}

function fillRule(rule: LookupRule, call: CallFacts): LookupRule | undefined {
  const filled: LookupRule = { ...rule };
  for (const field of ['textEquals', 'textIncludes'] as const) {
    if (rule[field] === undefined) continue;
    const value = fillTemplate(rule[field], call);
    if (value === undefined) return undefined;
    filled[field] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  if (rule.structured) {
    const equals = fillTemplate(rule.structured.equals, call);
    if (equals === undefined) return undefined;
    filled.structured = { field: rule.structured.field, equals };
  }
  return filled;
}

/** The lookup of one call, or undefined when the call lacks an argument a template names (then a person decides). */
export function prepareLookup(lookup: LookupPolicy, call: CallFacts): PreparedLookup | undefined {
  const args = fillTemplate(lookup.arguments, call) as Record<string, unknown> | undefined;
  const found = fillRule(lookup.found, call);
  const absent = lookup.absent ? fillRule(lookup.absent, call) : undefined;
  if (!args || !found || (lookup.absent && !absent)) return undefined;
  return { tool: lookup.tool, arguments: args, found, ...(absent ? { absent } : {}) };
}

/** The part of a tool result a lookup rule reads. */
export interface LookupAnswer {
  content?: readonly unknown[];
  structuredContent?: unknown;
  isError?: boolean;
}

export function answerText(answer: LookupAnswer): string {
  return (answer.content ?? [])
    .filter(
      (block): block is { type: 'text'; text: string } =>
        (block as { type?: unknown })?.type === 'text' && typeof (block as { text?: unknown }).text === 'string',
    )
    .map((block) => block.text)
    .join('\n');
}

const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, v) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );

function matches(rule: LookupRule, answer: LookupAnswer): boolean {
  if ((answer.isError === true) !== (rule.isError ?? false)) return false;
  const text = answerText(answer);
  if (rule.textEquals !== undefined && text !== rule.textEquals) return false;
  if (rule.textIncludes !== undefined && !text.includes(rule.textIncludes)) return false;
  if (rule.structured && canonical(at(answer.structuredContent, rule.structured.field)) !== canonical(rule.structured.equals)) return false;
  return true;
}

/**
 * What a lookup's answer says: `found` when it matches the found rule, `absent` when it matches the absent rule
 * (default: a normal answer that is not found), else `undecided` (an error answer no rule covers: ask again later).
 */
export function judgeLookup(lookup: PreparedLookup, answer: LookupAnswer): 'found' | 'absent' | 'undecided' {
  if (matches(lookup.found, answer)) return 'found';
  if (matches(lookup.absent ?? { isError: false }, answer)) return 'absent';
  return 'undecided';
}
