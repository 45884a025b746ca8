import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * docs/toolkit.md is copy-paste runnable because its code is the examples' files, which the pack test runs from the
 * packed package: each block marked `<!-- file: path -->` must be that file, byte for byte.
 */
const doc = readFileSync(join(PROJECT_ROOT, 'docs/toolkit.md'), 'utf8');
const shown = [...doc.matchAll(/<!-- file: (\S+) -->\n```\w*\n([\s\S]*?)```\n/g)].map((m) => ({ path: m[1]!, code: m[2]! }));

it('shows each example file exactly as it is in examples/', () => {
  expect(shown.length).toBeGreaterThan(0);
  for (const { path, code } of shown) expect(code, path).toBe(readFileSync(join(PROJECT_ROOT, path), 'utf8'));
});

it('shows every source file of the examples it walks through', () => {
  const sources = ['own-mcp-server', 'approval-page', 'cdk-app'].flatMap((example) =>
    readdirSync(join(PROJECT_ROOT, 'examples', example))
      .filter((name) => name.endsWith('.ts'))
      .map((name) => `examples/${example}/${name}`),
  );
  expect(shown.map((s) => s.path).sort()).toEqual(sources.sort());
});

it('has the sections a team looks for', () => {
  expect(doc).toMatch(/^## Use it in your own MCP server$/m);
  expect(doc).toMatch(/^## A person's approval in your own server$/m);
  expect(doc).toMatch(/^## Your tools in your CDK app$/m);
});
