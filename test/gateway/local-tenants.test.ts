import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BIN, ROOT, sdkClient, startTestGateway, type TestGateway } from './support';

/**
 * A team trying the installed package locally makes a second tenant's token with the bin itself, and the docs its
 * `--help` names are in the package it installed.
 */
const run = promisify(execFile);
let gateway: TestGateway;

beforeAll(async () => {
  // The team's billing server over stdio (test/gateway/session-server.mjs); its ledger is never written here.
  const policy = { tools: { find_charge: { kind: 'read' } } };
  gateway = await startTestGateway({
    policy,
    argv: ['--', process.execPath, join(ROOT, 'test', 'gateway', 'session-server.mjs'), '--ledger=/nonexistent/ledger.jsonl'],
  });
});
afterAll(async () => {
  await gateway?.stop();
});

it('--token <tenant> prints a token of the local issuer that the running gateway takes, for that tenant', { timeout: 90_000 }, async () => {
  const { stdout } = await run(
    join(BIN, 'tsx'),
    ['bin/idempotent-mcp.ts', 'gateway', '--token', 'globex', '--state-dir', gateway.stateDir],
    { cwd: ROOT },
  );
  const token = stdout.trim();
  const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
  expect(Object.values(claims)).toContain('globex');
  const client = await sdkClient({ mcpUrl: gateway.mcpUrl, tokenFor: async () => token });
  const found = (await client.callTool({ name: 'find_charge', arguments: { charge_id: 'c1' } })) as { content: Array<{ text: string }> };
  expect(found.content[0]!.text).toBe('absent');
  await client.close();
});

it('the docs --help names ship in the package', async () => {
  const { stdout } = await run(join(BIN, 'tsx'), ['bin/idempotent-mcp.ts', 'gateway', '--help'], { cwd: ROOT });
  const named = [...new Set(stdout.match(/docs\/[\w.-]+\.md/g))];
  expect(named.length).toBeGreaterThan(0);
  const files = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files;
  for (const doc of named) expect(files, doc).toContain(doc);
});
