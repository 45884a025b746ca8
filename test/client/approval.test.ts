import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FetchLike } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { IdempotentMcpClient, type ApprovalLink, type IdempotentClientOptions } from '../../client/idempotent-client';
import { decideAsLocalPerson } from '../../scripts/local-approver';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';

/**
 * The retry-safe client and a payment that needs the person's approval on the endpoint's page (fixture_payment,
 * confirmation 'approval', MCP URL-mode elicitation), on the real local stack: the person signs in at the local dev
 * issuer and decides over HTTP; the fixture downstream's requests and bookings say what was paid.
 */
const TENANT = 'client-approval';
const PAY = FixtureTool.payment;
let stack: FixtureStack;
let token: string;
let serverAheadMs = 0;
const clients: IdempotentMcpClient[] = [];

beforeAll(async () => {
  // Every client is asked for the person's approval, 2025-era ones too (no opt-out to confirm on their side).
  stack = await startFixtureStack({ env: { CONFIRMATION_OPT_OUT_TOOLS: '' }, services: { clock: () => Date.now() + serverAheadMs } });
  token = await stack.tokenFor(TENANT);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await stack?.stop();
});

function approvalClient(overrides: Partial<IdempotentClientOptions>) {
  const client = new IdempotentMcpClient({
    url: stack.mcpUrl,
    token,
    session: `approval-${clients.length}`,
    approvalPollMs: 50,
    ...overrides,
  });
  clients.push(client);
  return client;
}

let payee = 0;
const payment = () => ({ amount_minor: 1250, currency: 'EUR', payee_id: `payee-client-${++payee}`, memo: 'rent' });

/** The payments the downstream holds for this payee, and the requests to pay under `key` that reached it. */
const paymentsTo = (payeeId: string) => stack.downstream.bookings().filter((b) => b.payload.payee_id === payeeId);
const requestsFor = (key: string) => stack.downstream.calls(key);

describe("a payment that needs the person's approval", () => {
  it('shows the link, waits while the person signs in and approves, then retries with the same key: paid once', async () => {
    const links: ApprovalLink[] = [];
    const client = approvalClient({
      // The wait for the person is not one request: it outlasts a request's time limit.
      requestTimeoutMs: 1000,
      onApprovalLink: (link) => {
        links.push(link);
        // The person decides later, while the client waits and asks again.
        setTimeout(() => void decideAsLocalPerson(link.url, { tenant: TENANT, name: 'alice', decision: 'approve' }), 1500);
      },
    });
    const args = payment();

    const call = await client.callWrite({ tool: PAY, args });

    expect(call).toMatchObject({ state: 'succeeded', result: { outcome: 'succeeded', replayed: false } });
    expect(links).toHaveLength(1);
    expect(links[0]).toMatchObject({ tool: PAY, renewed: false, url: expect.stringMatching(new RegExp(`^${stack.url}/approvals/`)) });
    expect(links[0]!.message).toContain(`Pay 12.50 EUR to ${args.payee_id}`);
    const paid = paymentsTo(args.payee_id);
    expect(paid).toHaveLength(1);
    expect(paid[0]!.key).toBe(call.key);
    expect(requestsFor(call.key)).toBe(1);

    // The intent again (a re-plan): the same key, the first payment's result, no second link.
    const again = await client.callWrite({ tool: PAY, args });
    expect(again).toMatchObject({ key: call.key, state: 'succeeded', result: { replayed: true } });
    expect(links).toHaveLength(1);
    expect(paymentsTo(args.payee_id)).toHaveLength(1);
    expect(requestsFor(call.key)).toBe(1);
  });

  it('a decline answers rejected / CONFIRMATION_DECLINED and nothing is paid', async () => {
    const client = approvalClient({
      onApprovalLink: (link) => decideAsLocalPerson(link.url, { tenant: TENANT, decision: 'decline' }),
    });
    const args = payment();

    const call = await client.callWrite({ tool: PAY, args });

    expect(call).toMatchObject({ state: 'failed', result: { outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } } });
    expect(call.status).toMatch(/^fixture_payment op_\S+ : rejected CONFIRMATION_DECLINED: /);
    expect(paymentsTo(args.payee_id)).toEqual([]);
    expect(requestsFor(call.key)).toBe(0);
  });

  it('an expired link is replaced by a new one, shown once more; then the client gives up, nothing paid', async () => {
    const links: ApprovalLink[] = [];
    const client = approvalClient({
      onApprovalLink: (link) => {
        links.push(link);
        // Nobody decides, and the server's clock passes the link's expiry (15 min).
        serverAheadMs += 16 * 60_000;
      },
    });
    const args = payment();
    const requestsBefore = stack.downstream.calls();
    try {
      const call = await client.callWrite({ tool: PAY, args });

      expect(links.map((l) => l.renewed)).toEqual([false, true]);
      expect(links[1]!.url).not.toBe(links[0]!.url);
      expect(call).toMatchObject({ state: 'failed', failure: { kind: 'deterministic' } });
      expect(call.status).toMatch(/not approved: the approval link expired twice .*nothing ran/);
    } finally {
      serverAheadMs = 0;
    }
    expect(paymentsTo(args.payee_id)).toEqual([]);
    expect(stack.downstream.calls()).toBe(requestsBefore);
  });

  it('gives up on a link nobody decides after the bounded wait, saying so; nothing paid', async () => {
    let now = Date.now();
    const shown: string[] = [];
    const client = approvalClient({
      approvalWaitMs: 60_000,
      approvalPollMs: 10_000,
      clock: () => now,
      sleep: async (ms) => {
        now += ms;
      },
      onApprovalLink: (link) => void shown.push(link.url),
    });
    const args = payment();

    const call = await client.callWrite({ tool: PAY, args });

    expect(shown).toHaveLength(1);
    expect(call).toMatchObject({ state: 'failed', failure: { kind: 'deterministic' } });
    expect(call.status).toContain(`not approved: no decision at ${shown[0]} within 60 s; nothing ran`);
    expect(paymentsTo(args.payee_id)).toEqual([]);
    expect(requestsFor(call.key)).toBe(0);
  });

  it.runIf(process.platform === 'linux')('opens the link with the platform opener when asked (xdg-open)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opener-'));
    const opened = join(dir, 'opened');
    await writeFile(join(dir, 'xdg-open'), `#!/bin/sh\necho "$1" > '${opened}'\n`);
    await chmod(join(dir, 'xdg-open'), 0o755);
    vi.stubEnv('PATH', `${dir}:${process.env.PATH}`);
    try {
      let link = '';
      const client = approvalClient({
        openApprovalLinks: true,
        onApprovalLink: (shown) => {
          link = shown.url;
          return decideAsLocalPerson(shown.url, { tenant: TENANT, decision: 'approve' });
        },
      });
      const args = payment();
      expect(await client.callWrite({ tool: PAY, args })).toMatchObject({ state: 'succeeded' });
      await expect.poll(() => readFile(opened, 'utf8').catch(() => '')).toBe(`${link}\n`);
      expect(paymentsTo(args.payee_id)).toHaveLength(1);
    } finally {
      vi.unstubAllEnvs();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** The JSON-RPC requests a client sent through its fetch seam: method, protocol version, tool. */
function recordingFetch() {
  const sent: Array<{ method: string; version: string | null; tool?: string }> = [];
  const seam: FetchLike = async (url, init) => {
    if (init?.method === 'POST' && typeof init.body === 'string') {
      const message = JSON.parse(init.body) as { method?: string; params?: { name?: string; protocolVersion?: string } };
      if (message.method) {
        // initialize names its version in the body; every later request in the Mcp-Protocol-Version header.
        const version =
          message.method === 'initialize'
            ? (message.params?.protocolVersion ?? null)
            : new Headers(init.headers).get('mcp-protocol-version');
        sent.push({ method: message.method, version, ...(message.params?.name ? { tool: message.params.name } : {}) });
      }
    }
    return fetch(url, init);
  };
  return { sent, seam };
}

describe('a payment over a 2025-11-25 connection (the link as the APPROVAL_REQUIRED tool result)', () => {
  /** A client that speaks only the 2025 handshake; every request is checked to be 2025-11-25. */
  function legacyClient(overrides: Partial<IdempotentClientOptions>) {
    const { sent, seam } = recordingFetch();
    const client = approvalClient({ protocolEra: 'legacy', fetch: seam, ...overrides });
    const paymentCalls = () => sent.filter((r) => r.method === 'tools/call' && r.tool === PAY);
    const expectLegacyOnly = () => {
      expect(sent[0]).toEqual({ method: 'initialize', version: '2025-11-25' });
      expect(sent.filter((r) => r.method === 'server/discover')).toEqual([]);
      expect(sent.filter((r) => r.method === 'tools/call').every((r) => r.version === '2025-11-25')).toBe(true);
    };
    return { client, paymentCalls, expectLegacyOnly };
  }

  it('shows the link, waits while the person approves, then sends the same call with the same key again: paid once', async () => {
    const links: ApprovalLink[] = [];
    const { client, paymentCalls, expectLegacyOnly } = legacyClient({
      onApprovalLink: (link) => {
        links.push(link);
        // The person decides while the client waits and asks again.
        setTimeout(() => void decideAsLocalPerson(link.url, { tenant: TENANT, name: 'carol', decision: 'approve' }), 200);
      },
    });
    const args = payment();

    const call = await client.callWrite({ tool: PAY, args });

    expect(call).toMatchObject({ state: 'succeeded', result: { outcome: 'succeeded', replayed: false } });
    expect(links).toHaveLength(1);
    expect(links[0]).toMatchObject({
      tool: PAY,
      renewed: false,
      url: expect.stringMatching(new RegExp(`^${stack.url}/approvals/`)),
      elicitationId: expect.any(String),
    });
    expect(links[0]!.message).toContain(`Pay 12.50 EUR to ${args.payee_id}`);
    // The link was answered by waiting: the call was asked for approval, sent again while undecided, then ran.
    expect(paymentCalls().length).toBeGreaterThanOrEqual(2);
    expectLegacyOnly();
    const paid = paymentsTo(args.payee_id);
    expect(paid).toHaveLength(1);
    expect(paid[0]!.key).toBe(call.key);
    expect(requestsFor(call.key)).toBe(1);

    // The intent again: the same key, the first payment replayed, no second link, no second payment.
    const again = await client.callWrite({ tool: PAY, args });
    expect(again).toMatchObject({ key: call.key, state: 'succeeded', result: { replayed: true } });
    expect(links).toHaveLength(1);
    expect(paymentsTo(args.payee_id)).toHaveLength(1);
    expect(requestsFor(call.key)).toBe(1);
  });

  it('a decline answers rejected / CONFIRMATION_DECLINED; calling again is declined again, nothing paid, no second link', async () => {
    const links: ApprovalLink[] = [];
    const { client, expectLegacyOnly } = legacyClient({
      onApprovalLink: (link) => {
        links.push(link);
        return decideAsLocalPerson(link.url, { tenant: TENANT, decision: 'decline' });
      },
    });
    const args = payment();

    const call = await client.callWrite({ tool: PAY, args });

    expect(call).toMatchObject({ state: 'failed', result: { outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } } });
    expect(call.status).toMatch(/^fixture_payment op_\S+ : rejected CONFIRMATION_DECLINED: /);
    const again = await client.callWrite({ tool: PAY, args });
    expect(again).toMatchObject({
      key: call.key,
      state: 'failed',
      result: { outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } },
    });
    expect(links).toHaveLength(1);
    expectLegacyOnly();
    expect(paymentsTo(args.payee_id)).toEqual([]);
    expect(requestsFor(call.key)).toBe(0);
  });

  it('gives up on a link nobody decides after approvalWaitMs, saying so; nothing paid', async () => {
    let now = Date.now();
    const shown: string[] = [];
    const { client, paymentCalls } = legacyClient({
      approvalWaitMs: 60_000,
      approvalPollMs: 10_000,
      clock: () => now,
      sleep: async (ms) => {
        now += ms;
      },
      onApprovalLink: (link) => void shown.push(link.url),
    });
    const args = payment();

    const call = await client.callWrite({ tool: PAY, args });

    expect(shown).toHaveLength(1);
    expect(call).toMatchObject({ state: 'failed', failure: { kind: 'deterministic' } });
    expect(call.status).toContain(`not approved: no decision at ${shown[0]} within 60 s; nothing ran`);
    // One request per poll: the first, five waits of 10 s, then the one that finds the wait over.
    expect(paymentCalls()).toHaveLength(7);
    expect(paymentsTo(args.payee_id)).toEqual([]);
    expect(requestsFor(call.key)).toBe(0);
  });
});
