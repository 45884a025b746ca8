import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../lambdas/local/free-port';
import { createTestTable } from '../support/dynamodb';
import { BIN, ROOT, scratch } from './support';

/**
 * The gateway's bin run as a user runs it, with no store to keep its records in: it must not serve (a gateway that
 * cannot keep records answers every write `unknown`, which nothing settles). Exit 2, one sentence, no stack trace,
 * no banner and no token.
 */
const run = promisify(execFile);
let dir: string;
let cleanup: () => Promise<void>;
let table: Awaited<ReturnType<typeof createTestTable>>;

beforeAll(async () => {
  ({ dir, cleanup } = await scratch('start'));
  await writeFile(join(dir, 'policy.json'), JSON.stringify({ tools: { echo: { kind: 'read' } } }));
  table = await createTestTable();
});
afterAll(async () => {
  await table?.drop();
  await cleanup?.();
});

/** The bin's exit code and output; `env` replaces the store's settings of this process. */
async function start(
  env: Record<string, string>,
  policy = join(dir, 'policy.json'),
  upstream = ['--upstream-url', 'http://127.0.0.1:9/mcp'],
) {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(AWS_|DYNAMODB_ENDPOINT$|TABLE_NAME$)/.test(name)),
  ) as Record<string, string>;
  const argv = ['bin/idempotent-mcp.ts', 'gateway', '--policy', policy, '--port', '0', '--state-dir', join(dir, 'state'), ...upstream];
  try {
    const { stdout, stderr } = await run(join(BIN, 'tsx'), argv, { cwd: ROOT, env: { ...clean, ...env }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failed = err as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

function expectRefused(result: { code: number; stdout: string; stderr: string }, sentence: RegExp) {
  const lines = result.stderr
    .split('\n')
    .filter(
      (line) =>
        line.trim() &&
        !/NodeVersionSupportWarning|node >=22|upgrade to node|a\.co\/|trace-warnings|versions published|To continue receiving|security updates/.test(
          line,
        ),
    );
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(sentence);
  expect(result.stderr).not.toMatch(/\n\s+at /);
  expect(result.stdout).toBe('');
  expect(result.code).toBe(2);
}

describe('the gateway does not start without a store', () => {
  it('no DYNAMODB_ENDPOINT and no region', { timeout: 90_000 }, async () => {
    const result = await start({});
    expectRefused(result, /^The gateway did not start: no DynamoDB to keep the records in: set DYNAMODB_ENDPOINT/);
    // The installed package's own command, not a script of this repository.
    expect(result.stderr).toContain('`npx idempotent-mcp dev --dynamodb-only` starts one');
    expect(result.stderr).not.toContain('npm run');
  });

  it('a DYNAMODB_ENDPOINT nothing answers at', { timeout: 90_000 }, async () => {
    const port = await freePort();
    expectRefused(
      await start({ DYNAMODB_ENDPOINT: `http://127.0.0.1:${port}` }),
      new RegExp(`^The gateway did not start: DynamoDB at http://127.0.0.1:${port} cannot be reached`),
    );
  });

  it('a region whose table does not exist', { timeout: 90_000 }, async () => {
    // The region's DynamoDB stood in for by DynamoDB Local (the SDK's own endpoint variable), without the table.
    const result = await start({
      AWS_REGION: 'eu-west-1',
      AWS_ENDPOINT_URL_DYNAMODB: table.endpoint,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      TABLE_NAME: 'no-such-table',
    });
    expectRefused(result, /^The gateway did not start: the table no-such-table does not exist in eu-west-1: set TABLE_NAME/);
  });
});

describe("the policy file's mistakes come first", () => {
  it('four mistakes on one tool, and no store: all four are reported, each in a sentence', { timeout: 90_000 }, async () => {
    const policy = join(dir, 'four-mistakes.json');
    await writeFile(
      policy,
      JSON.stringify({
        tools: {
          charge: {
            kind: 'write',
            confirmation: 'approval',
            summary: 'Charge {{amount}} ({{$key}})',
            fingerprint: { exclude: ['note'] },
            reconcile: { tool: 'charge', arguments: { ref: '{{ref}}' }, found: { textIncludes: 'booked' } },
          },
        },
      }),
    );
    const result = await start({}, policy);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.stderr).toContain('The gateway did not start: The gateway policy has 4 mistakes:');
    expect(result.stderr.split('\n').filter((line) => line.startsWith('- '))).toEqual([
      '- tool charge: field inFlightWindowMs is required (how long the upstream may still apply a call after the gateway gave up on it, in ms)',
      '- tool charge: field summary: {{$key}} cannot be shown in a summary (the person approves the arguments: name them, {{name}})',
      '- tool charge: field reconcile.tool: charge is a write in this policy; the lookup must be a read (the reconciler calls it unkeyed, as often as it checks)',
      '- tool charge: field fingerprint.exclude cannot be used with confirmation "approval": the person approves the arguments, and an excluded one (note) could differ in what is sent; remove it from exclude',
    ]);
    // Not the store's sentence: the file is what to fix first, and every mistake in it at once.
    expect(result.stderr).not.toContain('no DynamoDB');
  });
});

describe('the gateway does not start without its upstream: one sentence naming it and what to do', () => {
  const store = () => ({ DYNAMODB_ENDPOINT: table.endpoint, TABLE_NAME: table.tableName });

  it('a URL nothing answers at', { timeout: 90_000 }, async () => {
    const url = `http://127.0.0.1:${await freePort()}/mcp`;
    const result = await start(store(), undefined, ['--upstream-url', url]);
    expectRefused(
      result,
      new RegExp(
        `^The gateway did not start: the upstream ${url.replace(/[./]/g, '\\$&')} cannot be reached \\(connection refused\\): start it, or give --upstream-url`,
      ),
    );
    expect(result.stderr).not.toMatch(/UpstreamError|TypeError|fetch failed/);
  });

  it('a command that does not exist', { timeout: 90_000 }, async () => {
    const result = await start(store(), undefined, ['--', '/nonexistent/server', '--flag']);
    expectRefused(
      result,
      /^The gateway did not start: the upstream command \/nonexistent\/server --flag cannot be started: there is no such program; give the path of an MCP server/,
    );
    expect(result.stderr).not.toMatch(/Error|ENOENT|spawn/);
  });

  it('a command that exits at once', { timeout: 90_000 }, async () => {
    const result = await start(store(), undefined, ['--', process.execPath, '-e', 'process.exit(0)']);
    expectRefused(
      result,
      /^The gateway did not start: the upstream command \S+ -e process\.exit\(0\) closed before it answered: run it on its own to see why/,
    );
    expect(result.stderr).not.toMatch(/Error|Connection closed/);
  });
});
