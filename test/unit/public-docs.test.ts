import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { DEFAULT_TENANT_CLAIM } from '../../lambdas/config';
import { DEFAULT_APPROVAL_TTL_SECONDS, FORM_CLIENT, MAX_DECIDER_CHARS } from '../../lambdas/confirmation/core/approval';
import { DynamoDbClientDefaults } from '../../lambdas/store/clients';
import { toolkitModules } from './toolkit';

/**
 * A public declaration's doc is read by a team that can import only the public names: it names no toolkit name a
 * team cannot import. The defaults it states are said in words, not by an internal constant of defaults
 * (`DynamoDbClientDefaults`, `DEFAULT_POLICY`) a team cannot open; a behaviour is said in words, or by the public
 * name a team uses (`IdempotencyError` with its `code`), not by the internal helper that implements it.
 */

const reported = new Set(
  readdirSync(join(PROJECT_ROOT, 'exports'))
    .filter((file) => file.endsWith('.api.md'))
    .flatMap((file) => readFileSync(join(PROJECT_ROOT, 'exports', file), 'utf8').match(/[A-Za-z_$][\w$]*/g) ?? []),
);
const modules = toolkitModules().map((file) => ({ file, source: readFileSync(join(PROJECT_ROOT, file), 'utf8') }));

/** The names the toolkit's modules export (declared exported, or listed in `export { ... }`) that no public subpath exports. */
const internalNames = new Set(
  modules
    .flatMap(({ source }) => [
      ...[
        ...source.matchAll(
          /^export\s+(?:(?:declare|abstract|async)\s+)*(?:const|let|function\*?|class|interface|type|enum|namespace)\s+([A-Za-z_$][\w$]*)/gm,
        ),
      ].map((match) => match[1]!),
      ...[...source.matchAll(/^export\s*\{([^}]*)\}/gm)].flatMap((match) =>
        match[1]!.split(',').map((entry) => entry.trim().split(/\s+/).at(-1)!),
      ),
    ])
    .filter((name) => name && !reported.has(name)),
);

/** The toolkit's exported constants of defaults that no public subpath exports. */
const internalDefaults = new Set([...internalNames].filter((name) => /Defaults$|^DEFAULT_/.test(name)));

/** The doc comments of each `@public` declaration, its members' included (up to the next top-level declaration). */
const publicDocs = ({ source }: { source: string }): string[] =>
  [
    ...source.matchAll(
      /\/\*\*(?:(?!\*\/)[\s\S])*@public(?:(?!\*\/)[\s\S])*\*\/\s*export[\s\S]*?(?=\n\}|\n\/\*\*|\nexport |\nconst |\nfunction |$)/g,
    ),
  ].flatMap((declaration) => declaration[0].match(/\/\*\*[\s\S]*?\*\//g) ?? []);

it('no doc of a public declaration names an internal constant of defaults', () => {
  expect(internalDefaults).toContain('DynamoDbClientDefaults');
  const named = modules.flatMap((module) =>
    publicDocs(module).flatMap((doc) =>
      [...doc.matchAll(/[A-Za-z_$][\w$]*/g)].filter(([name]) => internalDefaults.has(name)).map(([name]) => `${module.file}: ${name}`),
    ),
  );
  expect(named).toEqual([]);
});

/** Names a public doc may put in backticks though a toolkit module exports them, each for what the doc means by it. */
const ALLOWED = new Set([
  // The export Lambda calls in a team's entry file (ServiceFunctionProps.entry), not the relay function's own.
  'handler',
]);

it('no doc of a public declaration names, in backticks, a name the toolkit exports but no public subpath does', () => {
  expect(internalNames).toContain('keyIsFree');
  const named = modules.flatMap((module) =>
    publicDocs(module).flatMap((doc) =>
      [...doc.matchAll(/`([^`]+)`/g)].flatMap(([, code]) =>
        (code!.match(/[A-Za-z_$][\w$]*/g) ?? [])
          .filter((name) => internalNames.has(name) && !ALLOWED.has(name))
          .map((name) => `${module.file}: ${name}`),
      ),
    ),
  );
  expect(named).toEqual([]);
});

it("createDynamoDbClient's doc says the client defaults it applies", () => {
  const clients = modules.find(({ file }) => file.endsWith(join('store', 'clients.ts')))!;
  const doc = publicDocs(clients)
    .join('\n')
    .replace(/\s*\*\s*/g, ' ');
  const { maxAttempts, connectionTimeoutMs, requestTimeoutMs } = DynamoDbClientDefaults;
  expect(doc).toContain(`${maxAttempts} attempts per request`);
  expect(doc).toContain(`a ${connectionTimeoutMs / 1000} s connection timeout and a ${requestTimeoutMs / 1000} s request timeout`);
});

it('the approval link lifetime and the tenant claim say their defaults as the constants hold them', () => {
  const doc = (file: string) => publicDocs(modules.find((module) => module.file === file)!).join('\n');
  expect(doc(join('lambdas', 'confirmation', 'gate.ts'))).toContain(`Default ${DEFAULT_APPROVAL_TTL_SECONDS} (15 minutes)`);
  expect(doc(join('lib', 'constructs', 'auth.ts'))).toContain(`@default '${DEFAULT_TENANT_CLAIM}' (the functions' own default)`);
});

it("the approval log's entries say their values as the constants hold them", () => {
  const doc = (file: string) =>
    publicDocs(modules.find((module) => module.file === file)!)
      .join('\n')
      .replace(/\s*\*\s*/g, ' ');
  expect(doc(join('lambdas', 'confirmation', 'approval-store.ts'))).toContain(`(\`by\` cut to ${MAX_DECIDER_CHARS} characters)`);
  expect(doc(join('lambdas', 'confirmation', 'core', 'approval.ts'))).toContain(`or '${FORM_CLIENT}' (form`);
});
