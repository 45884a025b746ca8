import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT as ROOT } from '../../lib/package-root';
import type { LocalStack } from '../support/local-stack';
import type { ToolDefinition } from '../../lambdas/mcp/tool-types';
import { callWrite, connectClient, startTestStack } from '../support/mcp';
import { PageVisitor } from '../support/approval';
import { sandboxLedger } from '../support/side-effects';
import { TSC } from '../../scripts/declarations';

/**
 * README's examples run as printed. Every shell and TypeScript block runs here against a local stack (its port in
 * place of 3000), unless the comment before it says why it cannot run offline: those are listed below by their
 * first line, so a block is never left out in silence.
 */
const run = promisify(execFile);
const CODE = new Set(['bash', 'sh', 'ts', 'typescript']);
const NOT_RUN_OFFLINE = ['npm ci && npm start'];
/**
 * Blocks README had that moved to a document of their own (README stays short): each is marked there
 * `<!-- readme-test: run (...) -->` and runs here as it did in README.
 */
const MOVED_FROM_README = ['docs/agent-client.md'];

interface Block {
  lang: string;
  code: string;
  line: number;
  /**
   * `skip (reason)`, `file <path>`, `patch <path>`, `approve (reason)` (run it, then the person approves the link it
   * printed, as README tells the reader to), or undefined: run it.
   */
  marker?: string;
}

function blocksOf(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    const before = lines[i - 1] ?? '';
    const marker = /^<!-- readme-test: (.+) -->$/.exec(before)?.[1];
    blocks.push({ lang: open[1]!, code: lines.slice(i + 1, end).join('\n'), line: i + 1, marker });
    i = end;
  }
  return blocks;
}

const firstLine = (block: Block) => block.code.split('\n')[0]!;

let readme: string;
let blocks: Block[];
let moved: Block[];
let stack: LocalStack;
let scratch: string;
let agentDir: string;
const local = (code: string) => code.replaceAll('http://127.0.0.1:3000', stack.url);

beforeAll(async () => {
  readme = await readFile(join(ROOT, 'README.md'), 'utf8');
  blocks = blocksOf(readme).filter((block) => CODE.has(block.lang));
  moved = (
    await Promise.all(
      MOVED_FROM_README.map(async (doc) =>
        blocksOf(await readFile(join(ROOT, doc), 'utf8'))
          .filter((block) => CODE.has(block.lang) && block.marker?.startsWith('run '))
          .map((block) => ({ ...block, doc })),
      ),
    )
  ).flat();
  // As `npm start` runs by default: no tool opted out of the person's approval.
  stack = await startTestStack({ env: { CONFIRMATION_OPT_OUT_TOOLS: '' } });
  scratch = join(ROOT, '.scratch', `readme-${process.pid}`);
  await mkdir(scratch, { recursive: true });
  agentDir = await mkdtemp(join(tmpdir(), 'readme-agent-'));
});
/**
 * Files the tool test writes into reference/tools/ (where README says the tool goes): removed by the test's own
 * `finally`, and here again, since a test that timed out goes on running and its `finally` may never come.
 */
const inTheTree: string[] = [];
afterAll(async () => {
  await Promise.all(inTheTree.map((file) => rm(file, { force: true })));
  await stack?.stop();
  await rm(scratch, { recursive: true, force: true });
  await rm(agentDir, { recursive: true, force: true });
});

describe('README', () => {
  it('marks every block it cannot run offline, with a reason, and only those', () => {
    const skipped = blocks.filter((block) => block.marker?.startsWith('skip'));
    for (const block of skipped) expect(block.marker, `line ${block.line}`).toMatch(/^skip \(.{10,}\)$/);
    for (const block of blocks.filter((b) => b.marker !== undefined))
      expect(block.marker, `line ${block.line}`).toMatch(/^(skip \(|file |patch |approve \()/);
    expect(skipped.map((block) => NOT_RUN_OFFLINE.find((start) => firstLine(block).startsWith(start)) ?? firstLine(block))).toEqual(
      NOT_RUN_OFFLINE,
    );
    // What runs: the token, the calls, the two TypeScript clients, the tool and its registration.
    expect(blocks.length - skipped.length).toBeGreaterThanOrEqual(7);
  });

  let token = '';
  it('runs its shell blocks in order in one shell, as a user pastes them', async () => {
    const shell = blocks.filter(
      (block) => (block.lang === 'bash' || block.lang === 'sh') && (block.marker === undefined || block.marker.startsWith('approve')),
    );
    const approvedFile = join(scratch, 'approved');
    // After a block that prints an approval link, the script waits while the person (here: the test) approves it.
    const waitForPerson = `echo "::approve::"\nwhile [ ! -f ${JSON.stringify(approvedFile)} ]; do sleep 0.2; done`;
    const script = [
      'set -euo pipefail',
      ...shell.map(
        (block) =>
          `echo "::block ${block.line}::"\n${local(block.code)}\necho${block.marker?.startsWith('approve') ? `\n${waitForPerson}` : ''}`,
      ),
      'echo "::token::$TOKEN"',
    ].join('\n');
    const env: NodeJS.ProcessEnv = { ...process.env, DEV_AUTH_DIR: (stack.config.auth as { devAuthDir: string }).devAuthDir };
    delete env.TOKEN;
    let stdout = '';
    let stderr = '';
    let approved: Promise<void> | undefined;
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (approved || !stdout.includes('::approve::')) return;
      // README's words: open the link, sign in as a person of tenant demo, approve.
      const link = /"approval_url":"(http:\/\/127\.0\.0\.1:\d+\/approvals\/[^"]+)"/.exec(stdout)?.[1];
      approved = (async () => {
        if (!link) throw new Error(`no approval link before the approval step:\n${stdout}`);
        const person = new PageVisitor();
        const decided = await person.decide(link, 'approve', await person.signIn(link, 'demo', 'readme-reader'));
        expect(decided.status).toBe(200);
        await writeFile(approvedFile, '');
      })();
      approved.catch(() => child.kill());
    });
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    await approved;
    expect(code, stderr).toBe(0);
    token = /::token::(.*)/.exec(stdout)![1]!;
    expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    const answers = stdout.split(/::block \d+::/).filter((part) => part.includes('"jsonrpc"'));
    // The payment asked by curl: the link as a plain tool result (no JSON-RPC error), nothing paid yet.
    const asked = answers.filter((answer) => answer.includes('::approve::'));
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatch(/"isError":false/);
    expect(asked[0]).toMatch(/"outcome":"in_progress".*"approval_url":"http[^"]+\/approvals\/.*"code":"APPROVAL_REQUIRED"/);
    expect(asked[0]).toContain('Ask the person to open this link, then call again with the same key');
    for (const answer of answers.filter((a) => !a.includes('::approve::'))) {
      expect(answer).not.toContain('"isError":true');
      expect(answer).toMatch(/"outcome":"succeeded"|"status":"succeeded"/);
    }
    // Approved once, paid once: the retry after the approval is the stack's one payment.
    expect((await sandboxLedger(stack)).payments).toMatchObject([{ amount_minor: 1250 }]);
  }, 90_000);

  it('runs its TypeScript clients against the local endpoint', async () => {
    expect(token).not.toBe('');
    // README's MCP SDK client, and the retry-safe client that moved to docs/agent-client.md.
    const programs = [
      ...blocks.filter((block) => block.lang === 'ts' && block.marker === undefined),
      ...moved.filter((block) => block.lang === 'ts'),
    ];
    expect(programs.length).toBe(2);
    for (const block of programs) {
      const file = join(scratch, `block-${'doc' in block ? 'moved-' : ''}${block.line}.ts`);
      await writeFile(file, local(block.code));
      // Run from another folder, as an agent's own project would: the ledger lands there.
      const { stdout } = await run(join(ROOT, 'node_modules/.bin/tsx'), ['--tsconfig', join(ROOT, 'tsconfig.json'), file], {
        cwd: agentDir,
        env: { ...process.env, TOKEN: token },
      });
      expect(stdout, `${'doc' in block ? block.doc : 'README'} line ${block.line}`).toMatch(/replayed: true|succeeded/);
    }
    expect(existsSync(join(agentDir, '.agent', 'ledger.json'))).toBe(true);
    // ...and in this repository, the ledger folder is not committed by accident.
    await run('git', ['check-ignore', '-q', '.agent/ledger.json'], { cwd: ROOT });
  }, 90_000);

  it('adds a write tool as printed: the file and its registration type-check, and the tool runs once per key', async () => {
    const file = blocks.find((block) => block.marker?.startsWith('file '))!;
    const patch = blocks.find((block) => block.marker?.startsWith('patch '))!;
    const toolPath = join(ROOT, file.marker!.slice('file '.length));
    const indexPath = join(ROOT, patch.marker!.slice('patch '.length));
    expect(existsSync(toolPath), `${toolPath} exists already`).toBe(false);

    // The registration as printed: its declaration is index.ts's own, its import and entry go in.
    const index = await readFile(indexPath, 'utf8');
    const declaration = patch.code.split('\n').find((line) => line.startsWith('export const tools'))!;
    expect(index).toContain(declaration);
    const imports = patch.code.split('\n').filter((line) => line.startsWith('import '));
    const entries = patch.code.split('\n').filter((line) => /^ {2}\w+,$/.test(line) && !index.includes(line));
    const lastImport = index.lastIndexOf('\nimport ');
    const afterImports = index.indexOf('\n', lastImport + 1) + 1;
    const patched = `${index.slice(0, afterImports)}${imports.join('\n')}\n${index.slice(afterImports)}`.replace(
      /\n\];/,
      `\n${entries.join('\n')}\n];`,
    );
    const patchedPath = join(indexPath, '..', `readme-index-${process.pid}.ts`);
    const tsconfig = join(scratch, 'tsconfig.json');
    try {
      inTheTree.push(toolPath, patchedPath);
      await writeFile(toolPath, file.code);
      await writeFile(patchedPath, patched);
      await writeFile(
        tsconfig,
        JSON.stringify({
          extends: join(ROOT, 'tsconfig.json'),
          compilerOptions: { noEmit: true },
          include: [],
          files: [toolPath, patchedPath],
        }),
      );
      await run(process.execPath, [join(ROOT, TSC), '-p', tsconfig], { cwd: ROOT }).catch((err: { stdout: string }) => {
        throw new Error(`README's tool does not type-check:\n${err.stdout}`);
      });
      expect(readme).toMatch(/npm run typecheck/);
      expect(readme).toMatch(/restart the server/);

      const { tools } = (await import(patchedPath)) as { tools: readonly ToolDefinition[] };
      const withTool = await startTestStack({ tools });
      try {
        const client = await connectClient(withTool, 'tenant-readme');
        const args = { idempotency_key: 'readme-reserve-0001', order_id: 'ord-1', sku: 'SKU-1', quantity: 3 };
        expect(await callWrite(client, 'reserve_stock', args)).toMatchObject({ outcome: 'succeeded', replayed: false });
        expect(await callWrite(client, 'reserve_stock', args)).toMatchObject({ outcome: 'succeeded', replayed: true });
        expect(
          await callWrite(client, 'reserve_stock', { ...args, idempotency_key: 'readme-reserve-0002', sku: 'DISCONTINUED-1' }),
        ).toMatchObject({
          outcome: 'failed',
          error: { code: 'SKU_DISCONTINUED' },
        });
        await client.close();
      } finally {
        await withTool.stop();
      }
    } finally {
      await rm(toolPath, { force: true });
      await rm(patchedPath, { force: true });
    }
  }, 120_000);
});
