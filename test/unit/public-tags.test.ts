import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { toolkitModules } from './toolkit';

/**
 * knip never reports an export tagged `@public` as unused, so a name taken out of exports/*.ts but left exported and
 * tagged in its module would pass it. The API reports (kept current by test/package/api-report.test.ts) list what the
 * subpaths export: every `@public` declaration must appear in one of them, or lose its tag.
 */

/** A doc comment carrying `@public`, then the exported declaration it belongs to. */
const TAGGED =
  /\/\*\*(?:(?!\*\/)[\s\S])*@public(?:(?!\*\/)[\s\S])*\*\/\s*export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:class|interface|type|function|const|let|enum|namespace)\s+([A-Za-z_$][\w$]*)/g;

const taggedPublic = (source: string): string[] => [...source.matchAll(TAGGED)].map((match) => match[1]!);

it('reads the tag as API Extractor does: on the declaration its doc comment precedes', () => {
  const source = [
    '/** Kept. @public */',
    'export interface Kept {}',
    '/** Not tagged. */',
    'export function other() {}',
    '/**',
    ' * Many lines.',
    ' *',
    ' * @public',
    ' */',
    'export const many = 1;',
  ].join('\n');
  expect(taggedPublic(source)).toEqual(['Kept', 'many']);
});

it('every declaration tagged @public is exported by a public subpath (in an API report)', () => {
  const reports = readdirSync(join(PROJECT_ROOT, 'exports'))
    .filter((file) => file.endsWith('.api.md'))
    .map((file) => readFileSync(join(PROJECT_ROOT, 'exports', file), 'utf8'))
    .join('\n');
  const reported = new Set(reports.match(/[A-Za-z_$][\w$]*/g));
  const tagged = toolkitModules().flatMap((file) =>
    taggedPublic(readFileSync(join(PROJECT_ROOT, file), 'utf8')).map((name) => ({ file, name })),
  );
  expect(tagged.length).toBeGreaterThan(100);
  expect(tagged.filter(({ name }) => !reported.has(name)).map(({ file, name }) => `${file}: ${name}`)).toEqual([]);
});
