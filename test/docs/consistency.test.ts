import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLOCK_TOLERANCE_SECONDS } from '../../lambdas/auth/verifier';
import { ErrorCode } from '../../lambdas/core/errors';
import { REVIEW_LOG_MAX_BYTES, REVIEW_LOG_MAX_ENTRIES } from '../../lambdas/core/state-machine';
import { DEFAULT_POLICY } from '../../lambdas/core/tool-policy';
import { PACKAGE_ROOT as ROOT } from '../../lib/package-root';
import { requestPaymentTool } from '../../reference/tools/request-payment';

/** What the documents say about the code agrees with the code, and the documents agree with each other. */
const read = (path: string) => readFile(join(ROOT, path), 'utf8');
const readme = await read('README.md');
const docs = await Promise.all(
  (await readdir(join(ROOT, 'docs')))
    .filter((f) => f.endsWith('.md'))
    .map(async (f) => ({ file: `docs/${f}`, text: await read(`docs/${f}`) })),
);

/** README's section on the contract, up to the next section. */
function section(title: string): string {
  const start = readme.indexOf(`## ${title}`);
  expect(start, title).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end === -1 ? undefined : end);
}

describe('the result contract in README', () => {
  it('lists every error code an answer can carry, and no code the code does not have', () => {
    // README's contract section links the table, which lives in docs/troubleshooting.md (README stays short).
    expect(section('The tools and the result contract')).toContain('docs/troubleshooting.md#every-error-code');
    const table = docs
      .find((d) => d.file === 'docs/troubleshooting.md')!
      .text.split('\n')
      .map((line) => /^\| `([A-Z][A-Z_]+)` \|/.exec(line)?.[1])
      .filter((code): code is string => code !== undefined);
    // Every code the toolkit defines, UNAUTHORIZED included: the endpoint answers a refused token with HTTP 401, but
    // a server of your own and the gateway answer it in a tool result.
    expect([...table].sort()).toEqual(Object.values(ErrorCode).sort());
  });

  it('says how long an outcome is kept by default, as the engine keeps it', () => {
    expect(DEFAULT_POLICY.retentionSeconds).toBe(24 * 3600);
    expect(section('The tools and the result contract')).toMatch(/kept 24 hours\s+by default/);
  });
});

describe('the documents agree', () => {
  it('every Inspector command is pinned, with its own Node 22 (docs/clients.md: unpinned breaks on Node 20)', () => {
    for (const { file, text } of [{ file: 'README.md', text: readme }, ...docs]) {
      for (const line of text.split('\n')) {
        // docs/clients.md says what the unpinned command resolves to, as the reason for the pin.
        const match = /npx [^`\n]*@modelcontextprotocol\/inspector[^`\n]*/.exec(line);
        if (!match || /resolves to/.test(line)) continue;
        expect(match[0], file).toMatch(/-p node@22\.\d+\.\d+ -p @modelcontextprotocol\/inspector@\d+\.\d+\.\d+ mcp-inspector/);
      }
    }
  });

  it('names the commands as the one bin runs them (idempotent-mcp ops, idempotent-mcp gateway); the old bins only as aliases', () => {
    const old = [];
    // The gateway's default table is also named idempotent-mcp-gateway.
    for (const { file, text } of [{ file: 'README.md', text: readme }, ...docs])
      for (const line of text.split('\n'))
        if (/idempotent-mcp-(ops|gateway)\b/.test(line.replaceAll('default `idempotent-mcp-gateway`', '')) && !/alias/.test(line))
          old.push(`${file}: ${line}`);
    expect(old).toEqual([]);
  });

  it("README's cost at rest names the Cognito machine client that docs/deploy.md adds", () => {
    const deploy = docs.find((d) => d.file === 'docs/deploy.md')!.text;
    expect(deploy).toMatch(/\$6 per active M2M client/);
    expect(section('Deploy')).toMatch(/about \$3\/month, plus \$6\/month for the\s+Cognito machine client/);
  });

  it('the clock tolerance on tokens is documented as the verifier applies it', () => {
    const security = docs.find((d) => d.file === 'docs/security.md')!.text;
    expect(security).toContain(`${CLOCK_TOLERANCE_SECONDS} seconds of tolerance`);
    expect(readme).toContain(`${CLOCK_TOLERANCE_SECONDS} seconds of tolerance`);
  });

  it("docs/security.md is whole: every bullet ends its sentence, and the approval log's bounds are the code's", () => {
    const security = docs.find((d) => d.file === 'docs/security.md')!.text;
    // A bullet runs until the next bullet, heading or blank line.
    const bullets = security.split(/\n(?=- |#|\n)/).filter((block) => block.startsWith('- '));
    expect(bullets.length).toBeGreaterThan(5);
    for (const bullet of bullets) expect(bullet.trimEnd(), bullet.slice(0, 40)).toMatch(/[.)]$/);
    expect(security).toContain(
      `(${REVIEW_LOG_MAX_ENTRIES} entries, ${REVIEW_LOG_MAX_BYTES / 1000} KB: ${REVIEW_LOG_MAX_ENTRIES / 2} rounds)`,
    );
  });

  it('npm ci installs DynamoDB Local, not Java; npm start checks for Java first, as the quick start says', async () => {
    expect(readme).not.toMatch(/Java 17\+ for DynamoDB Local,\s+which `npm ci` installs/);
    expect(section('Quick start')).toMatch(
      /Java 17\+ runtime for\s+DynamoDB Local \(`npm ci` installs DynamoDB Local; `npm start` checks for Java first/,
    );
    const { scripts } = JSON.parse(await read('package.json')) as { scripts: Record<string, string> };
    expect(scripts.prestart).toBe('bash scripts/prereqs.sh start');
  });

  it("README's MCP SDK snippet says to install the SDK major it imports, the one this project tests it with", async () => {
    const { devDependencies } = JSON.parse(await read('package.json')) as { devDependencies: Record<string, string> };
    const major = /\d+/.exec(devDependencies['@modelcontextprotocol/sdk']!)![0];
    const connect = section('Connect an agent');
    expect(connect).toMatch(/from '@modelcontextprotocol\/sdk\//);
    expect(connect).toContain(`npm install @modelcontextprotocol/sdk@${major}\``);
  });

  it('CHANGELOG keeps what is not released under one [Unreleased] at the top, no heading above the package version', async () => {
    const { version } = JSON.parse(await read('package.json')) as { version: string };
    const headings = [...(await read('CHANGELOG.md')).matchAll(/^## \[([^\]]+)\]/gm)].map((match) => match[1]!);
    expect(headings.filter((heading) => heading === 'Unreleased')).toHaveLength(1);
    expect(headings[0]).toBe('Unreleased');
    const number = (v: string) =>
      v
        .split('.')
        .map(Number)
        .reduce((sum, part) => sum * 1000 + part, 0);
    expect(headings.slice(1).filter((heading) => number(heading) > number(version))).toEqual([]);
    expect(headings).toContain(version);
  });

  it('adding a tool is as many lines in index.ts as the printed registration adds', () => {
    const add = section('Add your own tool');
    const patch = /<!-- readme-test: patch reference\/tools\/index.ts -->\n```ts\n([\s\S]*?)```/.exec(add)![1]!;
    const added = patch
      .split('\n')
      .filter((line) => line.startsWith('import ') || (/^ {2}\w+,$/.test(line) && line.trim() !== 'createOrderTool,'));
    expect(added).toHaveLength(2);
    expect(add).toMatch(/two lines in `reference\/tools\/index.ts`/);
  });
});

describe('one story of confirmation', () => {
  const doc = (file: string) => docs.find((d) => d.file === file)!.text;
  const mode = requestPaymentTool.confirmation;

  it("names request_payment's confirmation as the code declares it, wherever a table or the README tells a client what it gets", () => {
    expect(mode).toBe('approval');
    expect(doc('docs/clients.md')).toContain(`A payment (\`request_payment\`, \`confirmation: '${mode}'\`)`);
    expect(doc('docs/clients.md')).toMatch(/demo's `request_payment`: a signed-in person/);
    // What an older description said: a form, and every 2025-era client refused.
    expect(doc('docs/clients.md')).not.toMatch(/confirmation: 'required'` \(the demo's `request_payment`\)/);
    expect(doc('docs/side-effects.md')).toContain("`confirmation: 'approval'`");
  });

  it('gives every client without URL elicitation the link as a tool result, as the code answers (APPROVAL_REQUIRED)', () => {
    const code = ErrorCode.APPROVAL_REQUIRED;
    for (const text of [readme, doc('docs/clients.md'), doc('docs/confirmation.md'), doc('docs/troubleshooting.md')])
      expect(text).toContain(`\`${code}\``);
    // No document sends a client to the era's JSON-RPC error (-32042) or says such a client cannot reach the page:
    // only confirmation.md names that error, saying why it is not used.
    for (const { file, text } of [{ file: 'README.md', text: readme }, ...docs].filter((d) => d.file !== 'docs/confirmation.md')) {
      expect(text, file).not.toMatch(/-?32042|UrlElicitationRequired|URL-elicitation-required/);
      expect(text, file).not.toMatch(/cannot be sent to the (approval )?page/);
    }
    // One table says which client gets what; the others link to it.
    for (const file of ['docs/clients.md', 'docs/agent-client.md', 'docs/toolkit.md', 'docs/deploy.md', 'docs/troubleshooting.md'])
      expect(doc(file), file).toContain('confirmation.md#what-each-client-gets');
    expect(readme).toContain('docs/confirmation.md#what-each-client-gets');
  });

  it('describes the opt-out for the kinds of tool it applies to, and for the tool README opts out', () => {
    const optedOut = /CONFIRMATION_OPT_OUT_TOOLS=(\w+) npm start/.exec(readme)![1];
    expect(optedOut).toBe(requestPaymentTool.name);
    const rows = doc('docs/configuration.md')
      .split('\n')
      .filter((line) => /^\| `(CONFIRMATION_OPT_OUT_TOOLS|confirmationOptOut)` \|/.test(line));
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row).toContain(`\`confirmation: '${mode}'\``);
      expect(row).toContain("`'required'`");
      expect(row).toMatch(/without (the server asking anyone|anyone's approval)/);
    }
    // ...and what the operator sees when it is on.
    for (const text of [readme, doc('docs/clients.md'), doc('docs/confirmation.md')]) expect(text).toMatch(/ran without anyone's approval/);
  });

  it("shows amounts by the currency's minor units everywhere, never divided by 100", () => {
    for (const { file, text } of [{ file: 'README.md', text: readme }, ...docs])
      expect(text, file).not.toMatch(/amount_minor \/ 100|divided by 100/);
  });
});
