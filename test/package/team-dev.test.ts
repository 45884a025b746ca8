import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/declarations';
import { SDK_NODE_NOTICE_SWITCH } from '../../lambdas/local/sdk-node-notice';
import { callWrite } from '../support/mcp';
import { exampleProject, MAX_BUFFER, offlineEnv, run } from './support';

/** The team project docs/toolkit.md sets up for a CDK app: its set-up block run as printed, the packed package installed. */
const EXAMPLE = 'cdk-app';
/** The line the AWS SDK's Node version notice opens with (lambdas/local/sdk-node-notice.ts). */
const SDK_NOTICE = /NodeVersionSupportWarning/g;
const noticesIn = (text: string) => text.match(SDK_NOTICE)?.length ?? 0;

/**
 * A team's first day with the installed package (issue 43): in the project docs/toolkit.md's printed set-up makes
 * (test/package/support.ts: the packed tarball, the packages the docs list, from the registry), with the team's own
 * tools module (examples/cdk-app/tools.ts, the file its CDK app deploys), `npm run dev` (`idempotent-mcp dev tools.ts
 * --deliveries deliveries.ts`) starts DynamoDB Local from the package and prints a URL and a token; a retried write
 * replays; the approval page and the sign-in answer; the review command the banner prints finds the record. Every
 * command runs as in a person's shell (no settings of the test run), and none prints the AWS SDK's Node notice. The
 * same project's `npm run typecheck` and `npm test` are test/package/pack.test.ts's (examples/cdk-app), on the same
 * install.
 */
describe('idempotent-mcp dev from the packed package, in the team project docs/toolkit.md sets up', () => {
  let work: string;
  let project: string;
  let env: NodeJS.ProcessEnv;
  let dev: ChildProcess | undefined;
  let out = '';
  let err = '';
  let mcpUrl: string;
  let token: string;

  /** A command typed in the project's folder, as the docs print it. */
  const shell = (command: string) =>
    run('sh', ['-c', command], { cwd: project, env, timeout: 120_000, maxBuffer: MAX_BUFFER }).catch(
      (error: { code?: number; stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`${command} failed (${error.code ?? error.message}):\n${error.stdout ?? ''}\n${error.stderr ?? ''}`);
      },
    );

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'idempotent-mcp-dev-'));
    project = await exampleProject(EXAMPLE, work);
    env = offlineEnv({ PATH: `${join(project, 'node_modules/.bin')}:${process.env.PATH}`, npm_config_update_notifier: 'false' });
    // A person's shell: none of the test run's settings, no emulator of the run (dev starts its own).
    for (const name of [
      SDK_NODE_NOTICE_SWITCH,
      'POWERTOOLS_LOG_LEVEL',
      'POWERTOOLS_METRICS_DISABLED',
      'DYNAMODB_ENDPOINT',
      'SQS_ENDPOINT',
      'VITEST',
      'NODE_ENV',
    ])
      delete env[name];
    // Its own process group: npm, the shell, the command and what it starts stop together.
    dev = spawn('npm', ['run', 'dev', '--', '--port', '0'], { cwd: project, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    dev.stdout!.on('data', (chunk) => (out += chunk));
    dev.stderr!.on('data', (chunk) => (err += chunk));
    await new Promise<void>((resolve, reject) => {
      dev!.stdout!.on('data', () => out.includes('Ctrl-C to stop.') && resolve());
      dev!.once('exit', (code) => reject(new Error(`npm run dev exited (${code}) before it was ready:\n${out}\n${err}`)));
    });
    mcpUrl = /MCP URL\s+(\S+)/.exec(out)![1]!;
    token = /Bearer token\s+(\S+)/.exec(out)![1]!;
  }, 600_000);

  afterAll(async () => {
    if (dev?.pid && dev.exitCode === null) {
      const exited = new Promise((resolve) => dev!.once('exit', resolve));
      process.kill(-dev.pid, 'SIGINT');
      await exited;
    }
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  it('prints the MCP URL and a bearer token, and no AWS SDK notice', () => {
    expect(mcpUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    expect(token.split('.')).toHaveLength(3);
    expect(out).toContain('your tools from tools.ts and deliveries from deliveries.ts');
    expect(noticesIn(out + err)).toBe(0);
  });

  it('replays a retried write: the same idempotency_key twice, one reservation; the review command finds its record', {
    timeout: 180_000,
  }, async () => {
    const client = new Client({ name: 'team-dev-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
    );
    const args = { idempotency_key: `reserve-${randomUUID()}`, room: 'berlin-3', starts_at: '2027-01-04T09:00:00Z', minutes: 30 };
    let reservation = '';
    try {
      const first = await callWrite<{ reservation_id: string }>(client, 'rooms.reserve', args);
      const second = await callWrite<{ reservation_id: string }>(client, 'rooms.reserve', args);
      expect(first).toMatchObject({ outcome: 'succeeded', replayed: false });
      reservation = first.result!.reservation_id;
      expect(second).toMatchObject({ outcome: 'succeeded', replayed: true, result: { reservation_id: reservation } });
    } finally {
      await client.close();
    }

    // The review command as the banner prints it, then the record itself.
    const review = /Review\s+(npx idempotent-mcp ops list --tools tools\.ts)/.exec(out)?.[1];
    expect(review, out).toBeDefined();
    const listed = await shell(review!);
    const shown = await shell(`npx idempotent-mcp ops show demo rooms.reserve ${args.idempotency_key} --tools tools.ts --json`);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      tenant: 'demo',
      tool: 'rooms.reserve',
      idempotency_key: args.idempotency_key,
      status: 'SUCCEEDED',
      result: { reservation_id: reservation },
    });
    expect(noticesIn(listed.stderr + shown.stderr)).toBe(0);
  });

  it('serves the approval page and the local sign-in', async () => {
    const base = mcpUrl.replace(/\/mcp$/, '');
    const page = await fetch(`${base}/approvals/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<h1>Approvals</h1>');
    const signIn = new URL(`${base}/dev-issuer/authorize`);
    for (const [name, value] of Object.entries({
      response_type: 'code',
      code_challenge_method: 'S256',
      code_challenge: 'a'.repeat(43),
      client_id: 'approval-page',
      redirect_uri: `${base}/approvals/`,
      state: 's',
    }))
      signIn.searchParams.set(name, value);
    const form = await fetch(signIn);
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('<h1>Sign in</h1>');
  });

  it('ops and gateway say their new names in --help; the old bins still work, each saying once that it is deprecated', {
    timeout: 180_000,
  }, async () => {
    expect((await shell('npx idempotent-mcp ops --help')).stdout).toMatch(/^Usage: idempotent-mcp ops /);
    expect((await shell('npx idempotent-mcp gateway --help')).stdout).toMatch(/^Usage: idempotent-mcp gateway /);
    const ops = await shell('npx idempotent-mcp-ops list --tools tools.ts');
    expect(ops.stderr.match(/deprecated/g)).toEqual(['deprecated']);
    expect(ops.stderr).toContain('idempotent-mcp-ops is deprecated and goes in the next release: use idempotent-mcp ops');
    // docs/gateway.md's second tenant for the installed package, then the same through the old bin.
    const gatewayDoc = readFileSync(join(PROJECT_ROOT, 'docs/gateway.md'), 'utf8');
    const tokenCommand = /^npx idempotent-mcp gateway --token .*$/m.exec(gatewayDoc)?.[0];
    expect(tokenCommand, "docs/gateway.md prints how to get a second tenant's token").toBeDefined();
    const tenantOf = (jwt: string) =>
      (JSON.parse(Buffer.from(jwt.trim().split('.')[1]!, 'base64url').toString('utf8')) as { tenant?: string }).tenant;
    const second = await shell(tokenCommand!);
    expect(tenantOf(second.stdout)).toBe(/--token (\S+)/.exec(tokenCommand!)![1]);
    const aliased = await shell(tokenCommand!.replace('idempotent-mcp gateway', 'idempotent-mcp-gateway'));
    expect(tenantOf(aliased.stdout)).toBe(tenantOf(second.stdout));
    expect(aliased.stderr.match(/deprecated/g)).toEqual(['deprecated']);
    expect(noticesIn(ops.stderr + second.stderr + aliased.stderr)).toBe(0);
  });
});
