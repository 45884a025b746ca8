import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { Client as SdkClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as SdkTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Keys } from '../../lambdas/core/keys';
import { MODERN_PROTOCOL } from '../support/mcp';
import { FixtureTool, fixturePaymentArgs as paymentArgs, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { node22 } from '../support/node22';
import { launchChromium } from '../support/chromium';

/**
 * The person's approval from clients nobody here wrote (docs/confirmation.md, "What each client gets"): the MCP SDK's
 * 1.x client, its v2 client and the MCP Inspector's CLI, each declaring what it declares, against one local endpoint
 * (DynamoDB Local) and the payment tool that needs the person's approval. A client that can open a link (URL-mode
 * elicitation, 2026-07-28) is sent there by the protocol; every other one gets the link as a tool result
 * (APPROVAL_REQUIRED) to show. The person signs in and decides on the page in Chromium. The fixture downstream counts
 * every request it gets: a second run would show there even where a provider answered it from its own dedup.
 */
const TENANT = 'tenant-clients';
const PAY = FixtureTool.payment;

let stack: FixtureStack;
let browser: Browser;
let token: string;
/** The endpoint's clock, moved past a link's lifetime by the decline test (the page's sign-in follows it too). */
let clockAheadMs = 0;

beforeAll(async () => {
  const starting = startFixtureStack({
    env: { CONFIRMATION_OPT_OUT_TOOLS: '' },
    services: { clock: () => Date.now() + clockAheadMs },
  }).then((started) => (stack = started));
  const launching = launchChromium().then((launched) => (browser = launched));
  const failed = (await Promise.allSettled([starting, launching])).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  token = await stack.tokenFor(TENANT);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

/** The person opens the link in Chromium, signs in at the local dev issuer and approves or declines on the page. */
async function decideOnPage(link: string, decision: 'approve' | 'decline', name = 'alice'): Promise<void> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(link);
    await page.fill('#tenant', TENANT);
    await page.fill('#name', name);
    await page.click('#sign-in');
    await page.waitForLoadState('load');
    expect(await page.textContent('#summary')).toBe('Pay 12.50 EUR to payee-7 (memo: "rent")');
    await page.click(decision === 'approve' ? 'button.approve' : 'button[value="decline"]');
    await expect.poll(() => page.textContent('#state')).toMatch(decision === 'approve' ? /^Approved by / : /^Declined by /);
  } finally {
    await context.close();
  }
}

/** A tools/call answer as every client below reports it. */
interface Answer {
  isError: boolean;
  structured: Record<string, unknown>;
  text: string;
}

/** What an elicitation handler of a URL-mode client does with a link: the test's person, set per test. */
type Elicit = (params: { mode?: string; url?: string; message?: string }) => Promise<{ action: 'accept' | 'decline' | 'cancel' }>;

interface Driver {
  call(name: string, args: Record<string, unknown>): Promise<Answer>;
  close(): Promise<void>;
}

interface Row {
  /** The client and what it declares. */
  client: string;
  /** How it learns of the link: by URL-mode elicitation (the protocol sends the person there) or as the tool result. */
  delivery: 'elicitation' | 'result';
  connect(elicit: () => Elicit): Promise<Driver>;
}

const answerOf = (result: { isError?: boolean; structuredContent?: unknown; content?: unknown }): Answer => ({
  isError: Boolean(result.isError),
  structured: (result.structuredContent ?? {}) as Record<string, unknown>,
  text: ((result.content ?? []) as Array<{ type: string; text?: string }>).map((block) => block.text ?? '').join('\n'),
});

const auth = () => ({ requestInit: { headers: { Authorization: `Bearer ${token}` } } });

/** The SDK's 1.x client (protocol 2025-11-25): it declares at `initialize`, which a stateless server never sees. */
function sdk1(declares: string, capabilities: Record<string, unknown>): Row {
  return {
    client: `SDK 1.x, 2025-11-25, ${declares}`,
    delivery: 'result',
    async connect(elicit) {
      const client = new SdkClient({ name: 'approval-clients-sdk1', version: '1.0.0' }, { capabilities });
      if ('elicitation' in capabilities)
        client.setRequestHandler(ElicitRequestSchema, async (request) => elicit()(request.params as Parameters<Elicit>[0]));
      await client.connect(new SdkTransport(new URL(stack.mcpUrl), auth()));
      return {
        call: async (name, args) => answerOf((await client.callTool({ name, arguments: args })) as Parameters<typeof answerOf>[0]),
        close: () => client.close(),
      };
    },
  };
}

/** The SDK's v2 client: pinned to 2026-07-28 (capabilities on every request) or on the 2025 era's handshake. */
function sdk2(declares: string, capabilities: Record<string, unknown>, era: 'modern' | 'legacy'): Row {
  const url = era === 'modern' && (capabilities.elicitation as { url?: unknown } | undefined)?.url !== undefined;
  return {
    client: `SDK v2, ${era === 'modern' ? MODERN_PROTOCOL : '2025-11-25 (legacy era)'}, ${declares}`,
    delivery: url ? 'elicitation' : 'result',
    async connect(elicit) {
      const client = new V2Client(
        { name: 'approval-clients-sdk2', version: '1.0.0' },
        { versionNegotiation: { mode: era === 'modern' ? { pin: MODERN_PROTOCOL } : 'legacy' }, capabilities },
      );
      if ('elicitation' in capabilities)
        client.setRequestHandler('elicitation/create', (request) => elicit()(request.params as Parameters<Elicit>[0]));
      await client.connect(new V2Transport(new URL(stack.mcpUrl), auth()));
      return {
        call: async (name, args) => answerOf((await client.callTool({ name, arguments: args })) as Parameters<typeof answerOf>[0]),
        close: () => client.close(),
      };
    },
  };
}

const execFileAsync = promisify(execFile);
const require = createRequire(import.meta.url);
/** The Inspector's own bin (its package's `mcp-inspector`), run as a person runs it (`mcp-inspector --cli ...`), under Node 22: its engines ask for 22.19 or later. */
const INSPECTOR = (() => {
  const manifest = require.resolve('@modelcontextprotocol/inspector/package.json');
  return join(dirname(manifest), (JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> }).bin['mcp-inspector']!);
})();

/**
 * The MCP Inspector's CLI, one process per call (`--method tools/call`), over HTTP with the bearer token as a header.
 * It declares no elicitation (its CLI cannot show one), only roots; `--protocol-era` picks the era (default legacy).
 */
function inspector(era: 'legacy' | 'modern'): Row {
  return {
    client: `Inspector CLI, ${era === 'modern' ? MODERN_PROTOCOL : '2025-11-25 (its default)'}, no elicitation`,
    delivery: 'result',
    async connect() {
      // Its catalog and client config live under HOME: a fresh one, removed after.
      const home = mkdtempSync(join(tmpdir(), 'inspector-home-'));
      return {
        async call(name, args) {
          const argv = [
            INSPECTOR,
            '--cli',
            '--server-url',
            stack.mcpUrl,
            '--transport',
            'http',
            '--header',
            `Authorization: Bearer ${token}`,
            '--protocol-era',
            era,
            '--method',
            'tools/call',
            '--tool-name',
            name,
            '--tool-args-json',
            JSON.stringify(args),
            '--format',
            'json',
            '--quiet',
          ];
          const env = {
            ...process.env,
            HOME: home,
            MCP_CATALOG_PATH: join(home, 'mcp.json'),
            MCP_CLIENT_CONFIG_PATH: join(home, 'client.json'),
          };
          // It prints the result, then exits 5 when the result is an error (a script reads that as a failure).
          const { stdout, exitCode } = await execFileAsync(node22(), argv, { env }).then(
            ({ stdout }) => ({ stdout, exitCode: 0 }),
            (err: { stdout?: string; code?: number }) => ({ stdout: err.stdout ?? '', exitCode: err.code ?? -1 }),
          );
          const answer = answerOf((JSON.parse(stdout) as { result: Parameters<typeof answerOf>[0] }).result);
          expect(exitCode).toBe(answer.isError ? 5 : 0);
          return answer;
        },
        close: async () => rmSync(home, { recursive: true, force: true }),
      };
    },
  };
}

const ROWS: Row[] = [
  sdk1('URL elicitation', { elicitation: { url: {} } }),
  sdk1('form elicitation only', { elicitation: { form: {} } }),
  sdk1('no elicitation', {}),
  sdk2('URL elicitation', { elicitation: { url: {} } }, 'modern'),
  sdk2('form elicitation only', { elicitation: { form: {} } }, 'modern'),
  sdk2('no elicitation', {}, 'modern'),
  sdk2('URL elicitation', { elicitation: { url: {} } }, 'legacy'),
  inspector('legacy'),
  inspector('modern'),
];

const recordKey = (id: string) => ({ tenant: TENANT, tool: PAY, idempotencyKey: id });

/** The link an APPROVAL_REQUIRED result carries, checked for everything a client shows the model. */
function linkOf(answer: Answer): string {
  expect(answer.isError).toBe(false);
  expect(answer.structured).toMatchObject({
    outcome: 'in_progress',
    retryable: true,
    retry_after_ms: expect.any(Number),
    approval_url: expect.stringMatching(new RegExp(`^${stack.url}/approvals/`)),
    error: { code: 'APPROVAL_REQUIRED' },
  });
  const link = answer.structured.approval_url as string;
  expect(answer.text).toContain(`Ask the person to open this link, then call again with the same key: ${link}`);
  return link;
}

describe.each(ROWS)('$client', (row) => {
  let driver: Driver;
  /** What the client's elicitation handler does next (URL mode only); a client declaring none is never asked. */
  let elicit: Elicit = async () => {
    throw new Error('elicitation/create sent to a client that is given the link as a result');
  };
  beforeAll(async () => {
    driver = await row.connect(() => elicit);
  });
  afterAll(() => driver?.close());

  const operationId = async () => (await driver.call('issue_operation_id', { tool: PAY })).structured.operation_id as string;

  it('gets the link; retries before the person decided get the same link and run nothing; approved on the page, the retried call runs once', async () => {
    const id = await operationId();
    let link: string;
    let paid: Answer;
    if (row.delivery === 'result') {
      link = linkOf(await driver.call(PAY, paymentArgs(id)));
      // The client (or the model) retries on its own while the person has not decided.
      expect(linkOf(await driver.call(PAY, paymentArgs(id)))).toBe(link);
      expect(stack.downstream.calls(id)).toBe(0);
      await decideOnPage(link, 'approve');
      paid = await driver.call(PAY, paymentArgs(id));
    } else {
      const links: string[] = [];
      // The client says "accept" before the person decided: the server asks again with the same link; then the person approves.
      elicit = async (params) => {
        expect(params).toMatchObject({ mode: 'url', message: expect.stringContaining('Pay 12.50 EUR to payee-7 (memo: "rent")') });
        links.push(params.url!);
        if (links.length === 2) {
          expect(stack.downstream.calls(id)).toBe(0);
          await decideOnPage(params.url!, 'approve');
        }
        return { action: 'accept' };
      };
      paid = await driver.call(PAY, paymentArgs(id));
      expect(links).toHaveLength(2);
      expect(links[1]).toBe(links[0]);
      link = links[0]!;
    }
    expect(paid).toMatchObject({ isError: false, structured: { outcome: 'succeeded', replayed: false } });
    const replay = await driver.call(PAY, paymentArgs(id));
    expect(replay.structured).toMatchObject({ outcome: 'succeeded', replayed: true });
    // One run: one request reached the downstream, and the approval names the one run that used it.
    expect(stack.downstream.calls(id)).toBe(1);
    expect(stack.downstream.bookings(id)).toHaveLength(1);
    const record = await stack.services.store.get(recordKey(id));
    const approval = await stack.services.approvals.current(recordKey(id));

    // DynamoDB TTL deletes the settled record (its retention may be shorter than the link's lifetime): the yes was
    // used, so the same key asks the person again, and nothing runs twice.
    await stack.services.doc.send(new DeleteCommand({ TableName: stack.config.tableName, Key: Keys.idempotency(TENANT, PAY, id) }));
    if (row.delivery === 'result') {
      expect(linkOf(await driver.call(PAY, paymentArgs(id)))).not.toBe(link);
    } else {
      let asked: string | undefined;
      elicit = async (params) => {
        asked = params.url;
        await decideOnPage(params.url!, 'decline');
        return { action: 'accept' };
      };
      expect((await driver.call(PAY, paymentArgs(id))).structured).toMatchObject({
        outcome: 'rejected',
        error: { code: 'CONFIRMATION_DECLINED' },
      });
      expect(asked).toBeDefined();
      expect(asked).not.toBe(link);
    }
    expect(stack.downstream.calls(id)).toBe(1);
    // Read before TTL's delete: the person's yes names the run that used it, once.
    expect(approval).toMatchObject({ status: 'approved', decidedBy: `alice@${TENANT}`, usedBy: record!.ownerToken });
    expect(approval!.log.map((entry) => entry.event)).toEqual(['requested', 'approved', 'used']);
  });

  it('declined on the page: nothing runs, the key stays free, and a new call with it asks the person again', async () => {
    const id = await operationId();
    const declined = { isError: true, structured: { outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } } };
    let first: string | undefined;
    if (row.delivery === 'result') {
      first = linkOf(await driver.call(PAY, paymentArgs(id)));
      await decideOnPage(first, 'decline');
      const refused = await driver.call(PAY, paymentArgs(id));
      expect(refused).toMatchObject(declined);
      // The sentence says until when the key answers so, and how to ask sooner.
      expect(refused.text).toMatch(
        /Until \d{4}-\d\d-\d\dT[\d:.]+Z a call with this key hears this answer, after that it asks the person again; .*issue_operation_id/,
      );
      // A retry (the client's own, or the model's) hears the decline while the link lives: never a new link to the
      // person who said no, never a run.
      expect(await driver.call(PAY, paymentArgs(id))).toMatchObject(declined);
    } else {
      elicit = async (params) => {
        first = params.url!;
        await decideOnPage(params.url!, 'decline');
        return { action: 'accept' };
      };
      expect(await driver.call(PAY, paymentArgs(id))).toMatchObject(declined);
    }
    expect(stack.downstream.calls(id)).toBe(0);
    expect(await stack.services.store.get(recordKey(id))).toBeUndefined();

    // The key is free: a new call asks the person again (a new link), and their yes runs it once. A client that
    // answers rounds starts a new one at once; a client given the link, once the declined link's lifetime is over
    // (its calls are all alike: a new one cannot be told from a retry).
    let again: string | undefined;
    let paid: Answer;
    clockAheadMs = row.delivery === 'result' ? 16 * 60_000 : 0;
    try {
      if (row.delivery === 'result') {
        again = linkOf(await driver.call(PAY, paymentArgs(id)));
        await decideOnPage(again, 'approve');
        paid = await driver.call(PAY, paymentArgs(id));
      } else {
        elicit = async (params) => {
          again = params.url!;
          await decideOnPage(params.url!, 'approve');
          return { action: 'accept' };
        };
        paid = await driver.call(PAY, paymentArgs(id));
      }
    } finally {
      clockAheadMs = 0;
    }
    expect(again).toBeDefined();
    expect(again).not.toBe(first);
    expect(paid.structured).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(stack.downstream.calls(id)).toBe(1);
  });
});
