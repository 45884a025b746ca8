import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../support/local-stack';
import { ledger, startTestStack } from '../support/mcp';

/**
 * The MCP Inspector CLI commands of docs/clients.md, exactly as printed there, against the local stack: run by this
 * machine's npx (Node 20 here), they bring the Inspector's Node 22 from the npm registry themselves. `npm run
 * conformance` runs this file (the first run downloads the Inspector, about a minute).
 */
const DOC = join(import.meta.dirname, '..', '..', 'docs', 'clients.md');
const DOC_URL = 'http://127.0.0.1:3000/mcp';
const run = promisify(execFile);

/** The shell blocks of the document that run the Inspector's CLI, joined into one line each. */
function inspectorCommands(): string[] {
  const blocks = [...readFileSync(DOC, 'utf8').matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/\\\n\s*/g, '').trim());
  return blocks.filter((block) => block.includes('mcp-inspector --cli'));
}

let stack: LocalStack;
let token: string;
beforeAll(async () => {
  stack = await startTestStack();
  token = await stack.tokenFor('tenant-inspector');
});
afterAll(() => stack?.stop());

/** Runs a documented command against this stack, as a user would with $TOKEN exported; its answer is JSON on stdout. */
async function runDocumented(command: string, extra = '') {
  expect(command).toContain(DOC_URL);
  const { stdout, stderr } = await run('bash', ['-c', `${command.replace(DOC_URL, stack.mcpUrl)} ${extra}`], {
    // The machine's node and npx first on PATH: the command must not depend on them being Node 22.
    env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, TOKEN: token },
    timeout: 240_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  try {
    const answer = JSON.parse(stdout) as Record<string, any>;
    if (answer && typeof answer === 'object') return answer;
  } catch {
    // Reported below with what the Inspector printed.
  }
  throw new Error(`the Inspector printed no JSON answer:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`);
}

describe('the MCP Inspector CLI, as docs/clients.md prints it', () => {
  const [list, createOrder] = inspectorCommands();

  it('the document prints a tools/list and a create_order command, on the Node 22 that test/conformance/install.sh pins', () => {
    expect(inspectorCommands()).toHaveLength(2);
    expect(list).toContain('--method tools/list');
    expect(createOrder).toContain('--tool-name create_order');
    const pinned = /node@(\d+\.\d+\.\d+)/.exec(readFileSync(join(import.meta.dirname, 'install.sh'), 'utf8'))![1];
    for (const command of [list!, createOrder!]) expect(command).toContain(`-p node@${pinned} `);
  });

  it('lists the tools', async () => {
    const listed = await runDocumented(list!);
    expect(listed.tools.map((tool: { name: string }) => tool.name)).toEqual(expect.arrayContaining(['create_order', 'request_payment']));
  }, 300_000);

  it('calls create_order twice with one key: the second call is replayed, in either protocol era', async () => {
    const first = await runDocumented(createOrder!);
    expect(first.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    const second = await runDocumented(createOrder!);
    expect(second.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.structuredContent.result });

    // The same command speaking 2026-07-28 (its results carry the server's identity in `_meta`) replays it too.
    const modern = await runDocumented(createOrder!, '--protocol-era modern');
    expect(modern._meta?.['io.modelcontextprotocol/serverInfo']).toMatchObject({ name: 'idempotent-mcp' });
    expect(first._meta?.['io.modelcontextprotocol/serverInfo']).toBeUndefined();
    expect(modern.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true, result: first.structuredContent.result });

    const key = first.structuredContent.idempotency_key;
    expect((await ledger(stack)).orders.filter((order) => order.idempotency_key === key)).toHaveLength(1);
  }, 600_000);
});
