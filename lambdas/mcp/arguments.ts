import type { z } from 'zod';

const MAX_ISSUES_REPORTED = 5;

/** `items[0].quantity` for a model to find the field it got wrong. */
function fieldPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'arguments';
  return path.reduce<string>(
    (text, part, index) => (typeof part === 'number' ? `${text}[${part}]` : index === 0 ? String(part) : `${text}.${String(part)}`),
    '',
  );
}

/** One line per problem, each naming its field; never echoes the value. */
function describeIssues(error: z.ZodError): string {
  const lines = error.issues.slice(0, MAX_ISSUES_REPORTED).map((issue) => `${fieldPath(issue.path)}: ${issue.message}`);
  const more = error.issues.length - MAX_ISSUES_REPORTED;
  return `Invalid arguments: ${lines.join('; ')}${more > 0 ? `; and ${more} more` : ''}.`;
}

export type ParsedArguments<T> = { ok: true; data: T } | { ok: false; message: string };

export function parseArguments<S extends z.ZodType>(schema: S, args: unknown): ParsedArguments<z.output<S>> {
  const parsed = schema.safeParse(args ?? {});
  return parsed.success ? { ok: true, data: parsed.data } : { ok: false, message: describeIssues(parsed.error) };
}
