import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TENANT_CLAIM, EnvVars } from '../../lambdas/config';
import { ContextKey } from '../../reference/cdk/context';
import { ReferenceEnvVars } from '../../reference/config';
import { PACKAGE_ROOT } from '../../lib/package-root';

/** docs/configuration.md cannot drift from the code: its tables are read back and compared with the declarations. */
const page = readFileSync(join(PACKAGE_ROOT, 'docs', 'configuration.md'), 'utf8');

/** The rows of the table under `## <heading>`: first cell's backticked names, the default cell, the description. */
function rows(heading: string) {
  const section = page.split(/\n## /).find((part) => part.startsWith(heading));
  if (!section) throw new Error(`docs/configuration.md has no section "${heading}"`);
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => {
      const [names, defaults, what] = line.split(' | ').map((cell) => cell.replace(/^\| /, '').replace(/ \|$/, ''));
      return [...names!.matchAll(/`([^`]+)`/g)].map((match) => ({ name: match[1]!, defaults: defaults!, what: what! }));
    });
}

describe('docs/configuration.md', () => {
  it('lists every context key of reference/cdk/context.ts, and no other', () => {
    const documented = rows('Context keys').map((row) => row.name);
    expect([...documented].sort()).toEqual([...Object.values(ContextKey)].sort());
    for (const row of rows('Context keys')) expect(row.what.length, row.name).toBeGreaterThan(10);
  });

  it.each([
    ['Environment variables of the functions', EnvVars],
    ['Environment variables of the reference endpoint', ReferenceEnvVars],
  ] as const)('lists every variable under "%s", and no other, each with the default the code applies', (heading, variables) => {
    const documented = rows(heading);
    expect(documented.map((row) => row.name).sort()).toEqual(
      Object.values(variables)
        .map((variable) => variable.name)
        .sort(),
    );
    for (const variable of Object.values(variables) as { name: string; parse: (raw: undefined) => unknown }[]) {
      const row = documented.find((r) => r.name === variable.name)!;
      let fallback: unknown;
      try {
        fallback = variable.parse(undefined);
      } catch {
        fallback = undefined;
      }
      if (typeof fallback === 'string' || typeof fallback === 'number' || typeof fallback === 'boolean')
        expect(row.defaults, variable.name).toContain(`\`${String(fallback)}\``);
    }
  });

  it("gives the tenant claim one default, the code's, wherever it is named", () => {
    const defaultsOf = (name: string) =>
      [...rows('Context keys'), ...rows('Environment variables')].find((row) => row.name === name)!.defaults;
    expect(defaultsOf('authTenantClaim')).toMatch(new RegExp(`^\`${DEFAULT_TENANT_CLAIM}\``));
    expect(defaultsOf('AUTH_TENANT_CLAIM')).toBe(`\`${DEFAULT_TENANT_CLAIM}\``);
    // The agents' claim is never a person's attribute or `sub`: those name a person, not the tenant the agent acts for.
    for (const name of ['authTenantClaim', 'AUTH_TENANT_CLAIM']) expect(defaultsOf(name)).not.toMatch(/custom:|`sub`/);
    expect(page).not.toMatch(/default `sub`/);
  });
});
