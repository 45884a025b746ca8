import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * One name per concept, one concept per name, read from the API reports (exports/*.api.md, what a team can import):
 * a name two subpaths export is the same declaration in both (`WriteToolResult` in `/engine` and `/client`), never
 * two things (a construct and a runtime type both called `OutboxQueue`); and no public type is only another public
 * name under a second name (`type RegisterWriteToolOptions<S> = RegisterToolOptions<S>`).
 */
interface Declaration {
  subpath: string;
  name: string;
  text: string;
  /** API Extractor found no doc comment on it (`// @public (undocumented)`). */
  undocumented: boolean;
}

/** Each `export ...` declaration of a report, up to the blank line API Extractor puts after it. */
function declarationsOf(subpath: string, report: string): Declaration[] {
  const code = report.slice(report.indexOf('```ts'), report.lastIndexOf('```'));
  return [
    ...code.matchAll(
      /^(?:\/\/ @public( \(undocumented\))?\r?\n(?:\/\/.*\n)*)?export (?:declare )?(?:abstract )?(?:class|interface|type|function|const|enum|namespace) (\w+)[\s\S]*?(?=\n\n|\n*$)/gm,
    ),
  ].map((match) => ({
    subpath,
    name: match[2]!,
    undocumented: match[1] !== undefined,
    text: match[0]
      .replace(/^\s*\/\/.*$/gm, '')
      .replace(/\s+/g, ' ')
      .trim(),
  }));
}

/** Names exported by more than one subpath whose declarations differ there. */
function namesOfTwoThings(declarations: readonly Declaration[]): string[] {
  const byName = new Map<string, Map<string, string[]>>();
  for (const { subpath, name, text } of declarations) {
    const subpaths = byName.get(name) ?? byName.set(name, new Map()).get(name)!;
    subpaths.set(subpath, [...(subpaths.get(subpath) ?? []), text]);
  }
  return [...byName]
    .filter(([, subpaths]) => new Set([...subpaths.values()].map((texts) => texts.join('\n'))).size > 1)
    .map(([name, subpaths]) => `${name} (${[...subpaths.keys()].join(', ')})`);
}

/** Public types that are exactly another public name: `type A<S> = B<S>;`. */
function aliases(declarations: readonly Declaration[]): string[] {
  const names = new Set(declarations.map((d) => d.name));
  return declarations.flatMap(({ subpath, name, text }) => {
    const alias = /^export type \w+(?:<[^=]*>)? = (\w+)(?:<[^;|&]*>)?;$/.exec(text);
    return alias && names.has(alias[1]!) ? [`${subpath}: ${name} = ${alias[1]}`] : [];
  });
}

/** Members (properties, methods) with no doc comment: API Extractor marks each `// (undocumented)` in the report. */
const undocumentedMembers = (report: string) => report.match(/^[ \t]+\/\/ \(undocumented\)\r?$/gm)?.length ?? 0;

const REPORTS = join(PROJECT_ROOT, 'exports');
const reports = readdirSync(REPORTS)
  .filter((file) => file.endsWith('.api.md'))
  .map((file) => ({ subpath: file.replace(/\.api\.md$/, ''), text: readFileSync(join(REPORTS, file), 'utf8') }));
const declarations = reports.flatMap(({ subpath, text }) => declarationsOf(subpath, text));

it('reads every report: hundreds of declarations, over all ten subpaths', () => {
  expect(declarations.length).toBeGreaterThan(100);
  expect(new Set(declarations.map((d) => d.subpath)).size).toBe(10);
});

/**
 * The front door stays small (issue 48 asks for at most 150): public names, counted per subpath (a name two
 * subpaths export is two names to learn), at most this many. Lower it as the surface shrinks, never raise it: a new
 * name takes the place of one that goes.
 */
const MAX_PUBLIC_NAMES = 133;

/** Distinct names of each subpath (a value and a type of one name, like `ErrorCode`, are one name). */
const publicNames = (decls: readonly Declaration[]) => [...new Set(decls.map((d) => `${d.subpath}: ${d.name}`))];
const undocumentedNames = (decls: readonly Declaration[]) => [
  ...new Set(decls.filter((d) => d.undocumented).map((d) => `${d.subpath}: ${d.name}`)),
];

it('the public surface is at most MAX_PUBLIC_NAMES names, each with a doc comment', () => {
  expect(publicNames(declarations).length).toBeLessThanOrEqual(MAX_PUBLIC_NAMES);
  expect(undocumentedNames(declarations)).toEqual([]);
});

/**
 * A team reads a member's doc in its editor, as it reads a name's: members of public declarations with no doc
 * comment, over all reports, at most this many. Every member has its doc now; never raise it: a new member comes
 * with its doc.
 */
const MAX_UNDOCUMENTED_MEMBERS = 0;

it('at most MAX_UNDOCUMENTED_MEMBERS members of public declarations have no doc comment', () => {
  expect(reports.reduce((sum, { text }) => sum + undocumentedMembers(text), 0)).toBeLessThanOrEqual(MAX_UNDOCUMENTED_MEMBERS);
});

it('counts the members marked undocumented, not the declarations', () => {
  expect(
    undocumentedMembers(
      '// @public (undocumented)\nexport interface Bare {\n    // (undocumented)\n    a: string;\n    b: string;\n    // (undocumented)\n    c(): void;\n}',
    ),
  ).toBe(2);
});

it('counts a name once per subpath and sees which have no doc comment', () => {
  const report = (body: string) => `## API Report\n\n\`\`\`ts\n\n${body}\n\n\`\`\`\n`;
  const decls = declarationsOf(
    'engine',
    report(
      '// @public\nexport const ErrorCode: {\n    A: "A";\n};\n\n// @public (undocumented)\nexport type ErrorCode = string;\n\n// @public (undocumented)\n// Warning: (ae-forgotten-export) x\nexport interface Bare {\n}',
    ),
  );
  expect(publicNames(decls)).toEqual(['engine: ErrorCode', 'engine: Bare']);
  expect(undocumentedNames(decls)).toEqual(['engine: ErrorCode', 'engine: Bare']);
});

it('a name two subpaths export is one declaration in both', () => {
  expect(namesOfTwoThings(declarations)).toEqual([]);
});

it('no public type is another public name again', () => {
  expect(aliases(declarations)).toEqual([]);
});

it('finds a name of two things and an alias when there is one', () => {
  const report = (body: string) => `## API Report\n\n\`\`\`ts\n\n${body}\n\n\`\`\`\n`;
  const cdk = declarationsOf(
    'cdk',
    report('// @public\nexport class OutboxQueue extends Construct {\n    constructor(scope: Construct);\n}'),
  );
  const lambda = declarationsOf(
    'lambda',
    report(
      '// @public\nexport interface OutboxQueue {\n    sqs: SQSClient;\n}\n\n// @public\nexport type Options<S> = RegisterToolOptions<S>;\n\n// @public\nexport interface RegisterToolOptions<S> {\n    tenant: S;\n}',
    ),
  );
  expect(lambda.map((d) => d.name)).toEqual(['OutboxQueue', 'Options', 'RegisterToolOptions']);
  expect(namesOfTwoThings([...cdk, ...lambda])).toEqual(['OutboxQueue (cdk, lambda)']);
  expect(
    namesOfTwoThings([...lambda, ...declarationsOf('mcp', report('// @public\nexport interface OutboxQueue {\n    sqs: SQSClient;\n}'))]),
  ).toEqual([]);
  expect(aliases(lambda)).toEqual(['lambda: Options = RegisterToolOptions']);
});
