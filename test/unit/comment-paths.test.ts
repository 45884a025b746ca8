import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * A comment that names a path of this repository (`lambdas/core/in-flight.ts`, `docs/gateway.md`, `test/support/`)
 * sends a reader there: when the file moves, the comment must follow. A path is a token under one of the repository's
 * own top-level folders that ends in an extension or a `/`; globs and placeholders (`exports/<subpath>.ts`,
 * `lambdas/**`) are patterns, not paths, and are left alone.
 */
const ignored = new Set([
  'node_modules',
  // Built or written at run time (.gitignore): a comment may name what the build or a run leaves there.
  ...readFileSync(join(PROJECT_ROOT, '.gitignore'), 'utf8')
    .split('\n')
    .filter((line) => /^[\w.-]+\/$/.test(line))
    .map((line) => line.slice(0, -1)),
]);
const folders = readdirSync(PROJECT_ROOT, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.') && !ignored.has(entry.name))
  .map((entry) => entry.name);

const sources = (folder: string): string[] =>
  readdirSync(join(PROJECT_ROOT, folder), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? entry.name === 'node_modules' || entry.name.startsWith('.')
        ? []
        : sources(join(folder, entry.name))
      : /\.(ts|mjs)$/.test(entry.name)
        ? [join(folder, entry.name)]
        : [],
  );

/**
 * The comments of a file, as TypeScript's parser finds them (never inside a string or a regex): the trivia before
 * and after each node, which is every comment but one between two bare punctuation tokens (`{ /* here *\/ }`).
 */
function comments(file: string, text: string): { text: string; line: number }[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const found = new Map<number, { text: string; line: number }>();
  const collect = (pos: number) => {
    for (const range of ts.getLeadingCommentRanges(text, pos) ?? []) {
      if (!found.has(range.pos)) {
        found.set(range.pos, { text: text.slice(range.pos, range.end), line: source.getLineAndCharacterOfPosition(range.pos).line + 1 });
      }
    }
  };
  const visit = (node: ts.Node) => {
    collect(node.pos);
    collect(node.end);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return [...found.values()];
}

const PATH = new RegExp(`(?<![\\w./@$-])(?:${folders.join('|')})/[\\w.@/-]*`, 'g');

/** The repository paths a comment names, with its trailing punctuation off. */
function pathsIn(comment: string): string[] {
  return [...comment.matchAll(PATH)].flatMap((match) => {
    const next = comment[match.index + match[0].length] ?? '';
    const path = match[0].replace(/[.:,]+$/, '');
    if (next && '*{<$['.includes(next)) return [];
    if (match[0].endsWith('...')) return [];
    return path.endsWith('/') || /\.[a-z][\w]*$/i.test(path) ? [path] : [];
  });
}

it('finds the paths a comment names (the check reads what it should)', () => {
  expect(pathsIn('// the rule lives in lambdas/core/in-flight.ts, see docs/gateway.md.')).toEqual([
    'lambdas/core/in-flight.ts',
    'docs/gateway.md',
  ]);
  expect(pathsIn('/** helpers in test/support/ and `scripts/build.ts`: */')).toEqual(['test/support/', 'scripts/build.ts']);
  expect(pathsIn('// exports/<subpath>.ts, lambdas/**, test/support/..., a/lib/x.ts, lib the word, https://x.dev/docs/a.md')).toEqual([]);
});

it('names only paths that exist', () => {
  const files = folders.flatMap(sources);
  expect(files.length).toBeGreaterThan(100);
  const absent = (path: string) => !existsSync(join(PROJECT_ROOT, path));
  const missing = files.flatMap((file) => {
    const text = readFileSync(join(PROJECT_ROOT, file), 'utf8');
    // Parsing is the slow part: only a file that names a missing path anywhere is parsed for its comments.
    if (!pathsIn(text).some(absent)) return [];
    return comments(file, text).flatMap(({ text, line }) =>
      pathsIn(text)
        .filter(absent)
        .map((path) => `${file}:${line}: ${path}`),
    );
  });
  expect(missing, 'comments naming a path that is not in the repository').toEqual([]);
});
