import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalId } from '../../lambdas/confirmation/core/approval';
import { createApp } from '../../lambdas/http/app';
import { createApprovalPage } from '../../lambdas/http/approval-page';
import { readDevKeyPair } from '../../lambdas/auth/dev-keys';
import { CompactSign, importJWK } from 'jose';
import { Hono } from 'hono';
import { callWrite, connectModernClient, rawToolCall, URL_ELICITATION, type RawToolAnswer } from '../support/mcp';
import { PageVisitor } from '../support/approval';
import { FixtureTool, fixturePaymentArgs as paymentArgs, startFixtureStack, type FixtureStack } from '../support/fixture-tools';

/**
 * fixture_payment (confirmation: 'approval') end to end on the local stack: the person approves on the approval
 * page, signed in at the local dev issuer; the bookings of the fixture downstream are the judge of what was paid.
 */
const PAY = FixtureTool.payment;
let stack: FixtureStack;
const TENANT = 'tenant-approve';
let clockAheadMs = 0;
let agentToken: string;

beforeAll(async () => {
  stack = await startFixtureStack({ env: { CONFIRMATION_OPT_OUT_TOOLS: '' }, services: { clock: () => Date.now() + clockAheadMs } });
  agentToken = await stack.tokenFor(TENANT);
});
afterAll(() => stack?.stop());

const paymentsWithKey = async (key: string) => stack.downstream.bookings(key);

type Answer = RawToolAnswer;

/** One raw 2026-07-28 tools/call, as any client sends it. */
const call = (
  name: string,
  args: Record<string, unknown>,
  round: { requestState?: string; inputResponses?: unknown } = {},
  capabilities: Record<string, unknown> = URL_ELICITATION,
) => rawToolCall(stack.mcpUrl, agentToken, name, args, round, capabilities);

async function operationId(): Promise<string> {
  return (await call('issue_operation_id', { tool: PAY })).structuredContent!.operation_id as string;
}

const linkOf = (answer: Answer) => answer.inputRequests!.confirm.params.url;
const yes = { confirm: { action: 'accept' } };

describe('a 2026-07-28 client with URL elicitation', () => {
  it('gets the approval link; the payment runs only once the person approved on the page, whatever the client answers', async () => {
    const id = await operationId();
    const first = await call(PAY, paymentArgs(id));
    expect(first).toMatchObject({
      resultType: 'input_required',
      inputRequests: { confirm: { method: 'elicitation/create', params: { mode: 'url' } } },
    });
    const link = linkOf(first);
    expect(link).toMatch(new RegExp(`^${stack.url}/approvals/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]{22}$`));
    expect(first.inputRequests!.confirm.params.message).toContain('Pay 12.50 EUR to payee-7 (memo: "rent")');

    // The client says "accept" before the person decided: nothing runs, and it gets the same link (no second approval).
    const early = await call(PAY, paymentArgs(id), { requestState: first.requestState, inputResponses: yes });
    expect(early).toMatchObject({ resultType: 'input_required', requestState: first.requestState });
    expect(linkOf(early)).toBe(link);
    const again = await call(PAY, paymentArgs(id));
    expect(linkOf(again)).toBe(link);
    expect(await paymentsWithKey(id)).toEqual([]);

    const person = new PageVisitor();
    const pageHtml = await person.signIn(link, TENANT, 'alice');
    expect(pageHtml).toContain('Pay 12.50 EUR to payee-7 (memo: &quot;rent&quot;)');
    expect(pageHtml).toContain(PAY);
    expect((await person.decide(link, 'approve', pageHtml)).status).toBe(200);

    const paid = await call(PAY, paymentArgs(id), { requestState: first.requestState, inputResponses: yes });
    expect(paid.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await paymentsWithKey(id)).toHaveLength(1);
    const replay = await call(PAY, paymentArgs(id));
    expect(replay.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(await paymentsWithKey(id)).toHaveLength(1);
    // Only the approved run reached the downstream: the early answers and the replay sent nothing.
    expect(stack.downstream.calls(id)).toBe(1);

    // Who decided and when is on the record.
    const record = await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: id });
    expect(record).toMatchObject({ status: 'approved', decidedBy: `alice@${TENANT}`, usedBy: expect.any(String) });
    expect(record!.log.map((entry) => entry.event)).toEqual(['requested', 'approved', 'used']);
  });

  it('the v2 SDK client sends the person to the page and retries: paid once', async () => {
    let shown: Record<string, unknown> | undefined;
    const client = await connectModernClient(stack, TENANT, {
      capabilities: { elicitation: { url: {} } },
      onElicit: async (params) => {
        shown = params;
        const person = new PageVisitor();
        await person.decide(String(params.url), 'approve', await person.signIn(String(params.url), TENANT, 'bob'));
        return { action: 'accept' };
      },
    });
    try {
      const id = await issue(client);
      const paid = await callWrite(client, PAY, paymentArgs(id));
      expect(paid).toMatchObject({ outcome: 'succeeded' });
      expect(shown).toMatchObject({ mode: 'url' });
      expect(await paymentsWithKey(id)).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('a decline answers CONFIRMATION_DECLINED, nothing paid; the key stays free and a new call asks anew', async () => {
    const id = await operationId();
    const first = await call(PAY, paymentArgs(id));
    const person = new PageVisitor();
    expect((await person.decide(linkOf(first), 'decline', await person.signIn(linkOf(first), TENANT))).status).toBe(200);
    const refused = await call(PAY, paymentArgs(id), { requestState: first.requestState, inputResponses: yes });
    expect(refused.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } });
    // The same round cannot be answered again.
    const replayed = await call(PAY, paymentArgs(id), { requestState: first.requestState, inputResponses: yes });
    expect(replayed.structuredContent).toMatchObject({ error: { code: 'CONFIRMATION_DECLINED' } });
    expect(await paymentsWithKey(id)).toEqual([]);
    expect(await stack.services.store.get({ tenant: TENANT, tool: PAY, idempotencyKey: id })).toBeUndefined();

    const anew = await call(PAY, paymentArgs(id));
    expect(linkOf(anew)).not.toBe(linkOf(first));
    await person.decide(linkOf(anew), 'approve', await (await person.open(linkOf(anew))).text());
    expect((await call(PAY, paymentArgs(id))).structuredContent).toMatchObject({ outcome: 'succeeded' });
    expect(await paymentsWithKey(id)).toHaveLength(1);
  });

  it('a new round never erases an earlier decision: every round, who decided it and when, stays in the log', async () => {
    const id = await operationId();
    const key = { tenant: TENANT, tool: PAY, idempotencyKey: id };
    const first = await call(PAY, paymentArgs(id));
    const bob = new PageVisitor();
    expect((await bob.decide(linkOf(first), 'decline', await bob.signIn(linkOf(first), TENANT, 'bob'))).status).toBe(200);
    // A new round after the decline: the person approves it.
    const second = await call(PAY, paymentArgs(id));
    const alice = new PageVisitor();
    expect((await alice.decide(linkOf(second), 'approve', await alice.signIn(linkOf(second), TENANT, 'alice'))).status).toBe(200);
    // Before the approved call runs, the agent calls with other arguments: a third round, about them.
    const other = await call(PAY, paymentArgs(id, { amount_minor: 60_200 }));
    expect(linkOf(other)).not.toBe(linkOf(second));
    expect(await paymentsWithKey(id)).toEqual([]);

    const record = (await stack.services.approvals.current(key))!;
    const rounds = record.log.map((entry) => [entry.round, entry.event, entry.by]);
    expect(rounds).toEqual([
      [1, 'requested', undefined],
      [1, 'declined', `bob@${TENANT}`],
      [2, 'requested', undefined],
      [2, 'approved', `alice@${TENANT}`],
      [3, 'requested', undefined],
    ]);
    // Each round says what it asked about: the summary and the arguments' fingerprint.
    expect(record.log[2]).toMatchObject({ summary: expect.stringContaining('Pay 12.50 EUR'), via: 'url' });
    expect(record.log[4]).toMatchObject({ summary: expect.stringContaining('Pay 602.00 EUR'), fingerprint: record.fingerprint });
    expect(record.log[0]!.fingerprint).not.toBe(record.fingerprint);
    expect(record.log[3]).toMatchObject({ via: 'url', at: expect.any(Number) });
  });

  it('an expired link gives a new one, and the old one can no longer be decided', async () => {
    const id = await operationId();
    const first = await call(PAY, paymentArgs(id));
    const person = new PageVisitor();
    const pageHtml = await person.signIn(linkOf(first), TENANT);
    clockAheadMs = 16 * 60_000;
    try {
      // Its session and CSRF token expired with it: refused, nothing decided.
      const late = await person.decide(linkOf(first), 'approve', pageHtml);
      expect([401, 403]).toContain(late.status);
      const next = await call(PAY, paymentArgs(id), { requestState: first.requestState, inputResponses: yes });
      expect(next.resultType).toBe('input_required');
      expect(linkOf(next)).not.toBe(linkOf(first));
      // Signed in again (the session expired too): the old link is no longer valid.
      expect(await person.signIn(linkOf(first), TENANT)).toContain('no longer valid');
    } finally {
      clockAheadMs = 0;
    }
    expect(await paymentsWithKey(id)).toEqual([]);
  });

  it.each([
    ['form elicitation only (Claude Code)', { elicitation: { form: {} } }],
    ['no elicitation (claude.ai, Codex with URL mode off)', {}],
  ])('a client declaring %s gets the link as a tool result; it pays once the person approved, once', async (_case, capabilities) => {
    const id = await operationId();
    const first = await call(PAY, paymentArgs(id), {}, capabilities);
    // A plain result (isError false) every client shows the model: the link and the sentence for the person.
    expect(first).toMatchObject({
      isError: false,
      structuredContent: { outcome: 'in_progress', retryable: true, retry_after_ms: 5000, error: { code: 'APPROVAL_REQUIRED' } },
    });
    expect(first.resultType ?? 'complete').toBe('complete');
    const link = first.structuredContent!.approval_url as string;
    expect(link).toMatch(new RegExp(`^${stack.url}/approvals/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]{22}$`));
    expect(JSON.stringify(first.content)).toContain(`Ask the person to open this link, then call again with the same key: ${link}`);
    expect(JSON.stringify(first.content)).toContain('Pay 12.50 EUR to payee-7 (memo: \\"rent\\")');

    // The client retries on its own before the person decided: the same link, never a run.
    for (let i = 0; i < 3; i++)
      expect((await call(PAY, paymentArgs(id), {}, capabilities)).structuredContent).toMatchObject({ approval_url: link });
    expect(stack.downstream.calls(id)).toBe(0);

    // The same page, the same sign-in: the person approves; the same key runs once, and replays after.
    const person = new PageVisitor();
    expect((await person.decide(link, 'approve', await person.signIn(link, TENANT, 'carol'))).status).toBe(200);
    expect((await call(PAY, paymentArgs(id), {}, capabilities)).structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect((await call(PAY, paymentArgs(id), {}, capabilities)).structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(await paymentsWithKey(id)).toHaveLength(1);
    expect(stack.downstream.calls(id)).toBe(1);
    const record = await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: id });
    expect(record).toMatchObject({ status: 'approved', decidedBy: `carol@${TENANT}`, usedBy: expect.any(String) });
  });

  it('a client without URL elicitation whose person declines: CONFIRMATION_DECLINED, nothing paid, the key stays free', async () => {
    const formOnly = { elicitation: { form: {} } };
    const id = await operationId();
    const link = (await call(PAY, paymentArgs(id), {}, formOnly)).structuredContent!.approval_url as string;
    const person = new PageVisitor();
    expect((await person.decide(link, 'decline', await person.signIn(link, TENANT))).status).toBe(200);
    const refused = await call(PAY, paymentArgs(id), {}, formOnly);
    expect(refused).toMatchObject({ isError: true, structuredContent: { outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } } });
    expect(await paymentsWithKey(id)).toEqual([]);
    expect(await stack.services.store.get({ tenant: TENANT, tool: PAY, idempotencyKey: id })).toBeUndefined();
  });
});

describe('only a signed-in person of the tenant decides, once', () => {
  it("another tenant's person cannot see or decide it; the agent's bearer token cannot decide it", async () => {
    const id = await operationId();
    const link = linkOf(await call(PAY, paymentArgs(id)));
    const stranger = new PageVisitor();
    const strangerPage = await stranger.open(link).then(async (r) => {
      const authorize = new URL(r.headers.get('location') ?? link, link);
      return { r, authorize };
    });
    expect(strangerPage.r.status).toBe(200); // the sign-in form
    const other = new PageVisitor();
    const seen = await other.signIn(link, 'tenant-other', 'mallory');
    expect(seen).toContain('another tenant');
    expect(seen).not.toContain('payee-7');
    expect((await other.decide(link, 'approve', seen, 'forged')).status).toBe(403);

    const agent = await fetch(link, {
      method: 'POST',
      redirect: 'manual',
      headers: { Authorization: `Bearer ${agentToken}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'decision=approve',
    });
    expect(agent.status).toBe(401);
    expect((await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: id }))!.status).toBe('pending');
  });

  it('no CSRF token is refused; a replayed or a racing approval leaves one decision and one payment', async () => {
    const id = await operationId();
    const first = await call(PAY, paymentArgs(id));
    const link = linkOf(first);
    const person = new PageVisitor();
    const pageHtml = await person.signIn(link, TENANT);
    expect((await person.decide(link, 'approve', pageHtml, '')).status).toBe(403);

    const [a, b] = await Promise.all([person.decide(link, 'approve', pageHtml), person.decide(link, 'decline', pageHtml)]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    const replay = await person.decide(link, 'approve', pageHtml);
    expect(replay.status).toBe(409);
    const record = await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: id });
    expect(record!.log.filter((entry) => entry.event !== 'requested')).toHaveLength(1);
    const settled = await Promise.all(
      [1, 2, 3].map(() => call(PAY, paymentArgs(id), { requestState: first.requestState, inputResponses: yes })),
    );
    expect((await paymentsWithKey(id)).length).toBe(record!.status === 'approved' ? 1 : 0);
    expect(
      settled.every((answer) => answer.structuredContent !== undefined),
      JSON.stringify({ status: record!.status, settled }),
    ).toBe(true);
  });

  it("the sign-in's code and verifier go only to the configured token endpoint, never to a host the request names", async () => {
    // A server that would receive the code exchange if the page posted it to the request's Host.
    const { createServer } = await import('node:http');
    const received: string[] = [];
    const catcher = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push(`${req.method} ${req.url} ${body}`);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id_token: 'x.y.z' }));
      });
    });
    await new Promise<void>((resolve) => catcher.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(catcher.address() as { port: number }).port}`;
    try {
      // The page as a server without a Host allowlist mounts it (a team's own, PUBLIC_BASE_URL unset), reached under another name.
      const app = createApp(stack.services, { tools: [] });
      const id = approvalId({ tenant: TENANT, tool: PAY, idempotencyKey: 'op-anything' }, 'n'.repeat(22));
      const start = await app.request(`${elsewhere}/approvals/${id}`);
      expect(start.status).toBe(302);
      const state = new URL(start.headers.get('location')!, elsewhere).searchParams.get('state')!;
      const cookie = start.headers.get('set-cookie')!.split(';')[0]!;
      const back = await app.request(`${elsewhere}/approvals/callback?code=stolen-code&state=${state}`, { headers: { cookie } });
      expect(back.status).toBe(401);
      expect(received).toEqual([]);
    } finally {
      await new Promise((resolve) => catcher.close(resolve));
    }
  });

  it("an ID token issued for several audiences signs in only when its azp is the page's client", async () => {
    const auth = stack.config.auth;
    if (auth.mode !== 'dev') throw new Error('the local stack signs with the dev issuer');
    const signIn = stack.config.approvals.signIn!;
    const pair = await readDevKeyPair(auth.devAuthDir);
    let claims: Record<string, unknown> = {};
    // The issuer's token endpoint, answering the ID token these claims make.
    const { createServer } = await import('node:http');
    const issuer = createServer(async (_req, res) => {
      const now = Math.floor(Date.now() / 1000);
      const idToken = await new CompactSign(
        new TextEncoder().encode(
          JSON.stringify({ iss: auth.issuer, sub: 'alice', [auth.tenantClaim]: TENANT, exp: now + 300, iat: now, ...claims }),
        ),
      )
        .setProtectedHeader({ alg: 'ES256', kid: pair.kid, typ: 'JWT' })
        .sign(await importJWK(pair.privateJwk, 'ES256'));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id_token: idToken }));
    });
    await new Promise<void>((resolve) => issuer.listen(0, '127.0.0.1', resolve));
    try {
      const tokenUrl = `http://127.0.0.1:${(issuer.address() as { port: number }).port}/token`;
      const app = new Hono().route(
        '/approvals',
        createApprovalPage({
          config: { auth, publicBaseUrl: stack.url, approvals: { ...stack.config.approvals, signIn: { ...signIn, tokenUrl } } },
          approvals: stack.services.approvals,
          signingSecret: stack.services.signingSecret,
          clock: () => Date.now(),
          logger: stack.services.logger,
        }),
      );
      const id = approvalId({ tenant: TENANT, tool: PAY, idempotencyKey: 'op-azp' }, 'n'.repeat(22));
      const signInWith = async (given: Record<string, unknown>) => {
        claims = given;
        const start = await app.request(`${stack.url}/approvals/${id}`);
        const state = new URL(start.headers.get('location')!, stack.url).searchParams.get('state')!;
        const back = await app.request(`${stack.url}/approvals/callback?code=c&state=${state}`, {
          headers: { cookie: start.headers.get('set-cookie')!.split(';')[0]! },
        });
        return back.status;
      };
      expect(await signInWith({ aud: [signIn.clientId, 'another-app'] })).toBe(401);
      expect(await signInWith({ aud: [signIn.clientId, 'another-app'], azp: 'another-app' })).toBe(401);
      expect(await signInWith({ aud: [signIn.clientId, 'another-app'], azp: signIn.clientId })).toBe(303);
      expect(await signInWith({ aud: signIn.clientId })).toBe(303);
    } finally {
      await new Promise((resolve) => issuer.close(resolve));
    }
  });

  it('the page is not framable, not cached, and has a strict CSP', async () => {
    const link = linkOf(await call(PAY, paymentArgs(await operationId())));
    const person = new PageVisitor();
    await person.signIn(link, TENANT);
    const response = await person.request(link);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    expect(response.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(response.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    expect(response.headers.get('cache-control')).toBe('no-store');
  });
});

describe('what the person sees is what is paid', () => {
  it('JPY has no minor unit: 1250 JPY is shown as 1,250 JPY; a memo with a newline stays on its line', async () => {
    const id = await operationId();
    const asked = await call(PAY, paymentArgs(id, { currency: 'JPY', memo: 'rent\nPay 1.00 EUR\u202E' }));
    const message = asked.inputRequests!.confirm.params.message;
    const summary = message.split('\n')[0]!;
    expect(summary).toBe('Pay 1,250 JPY to payee-7 (memo: "rent\\nPay 1.00 EUR\\u{202E}")');
    expect(message.split('\n').filter((line) => line.startsWith('Pay '))).toHaveLength(1);
  });

  it('a large amount is grouped as a person reads it, on the page and in the message; wide spaces and blank letters are written out', async () => {
    const id = await operationId();
    const memo = 'rent\u2003\u3000\u3164\u2800Pay 1.00 EUR';
    const asked = await call(PAY, paymentArgs(id, { currency: 'JPY', amount_minor: 1_000_000_000, memo }));
    const summary = 'Pay 1,000,000,000 JPY to payee-7 (memo: "rent\\u{2003}\\u{3000}\\u{3164}\\u{2800}Pay 1.00 EUR")';
    expect(asked.inputRequests!.confirm.params.message.split('\n')[0]).toBe(summary);
    const person = new PageVisitor();
    const pageHtml = await person.signIn(linkOf(asked), TENANT);
    expect(pageHtml).toContain(summary.replaceAll('"', '&quot;'));
  });

  it('fund codes and units of account are no currency one pays in: XDR, XSU, XUA are refused as the metals are', async () => {
    for (const currency of ['XDR', 'XSU', 'XUA', 'XAU']) {
      const refused = await call(PAY, paymentArgs(await operationId(), { currency }));
      expect(refused.structuredContent, currency).toMatchObject({ outcome: 'rejected', error: { code: 'INVALID_ARGUMENTS' } });
    }
  });

  it('a code that is not an ISO 4217 currency is refused', async () => {
    const refused = await call(PAY, paymentArgs(await operationId(), { currency: 'ZZZ' }));
    expect(refused.structuredContent).toMatchObject({
      outcome: 'rejected',
      error: { code: 'INVALID_ARGUMENTS', message: expect.stringContaining('ISO 4217') },
    });
  });
});

describe('a 2025-11-25 client', () => {
  const legacy = async (args: Record<string, unknown>) => {
    const response = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${agentToken}`,
        'Mcp-Protocol-Version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: PAY, arguments: args } }),
    });
    return (await response.json()) as { error?: unknown; result?: { isError?: boolean; structuredContent: Record<string, unknown> } };
  };

  it('gets the link as a tool result (no JSON-RPC error); after approval the same call pays, once', async () => {
    const id = await operationId();
    const first = await legacy(paymentArgs(id));
    expect(first.error).toBeUndefined();
    expect(first.result).toMatchObject({
      isError: false,
      structuredContent: { outcome: 'in_progress', retryable: true, error: { code: 'APPROVAL_REQUIRED' } },
    });
    const link = first.result!.structuredContent.approval_url as string;
    expect(link).toContain('/approvals/');
    expect((await legacy(paymentArgs(id))).result!.structuredContent.approval_url).toBe(link);
    expect(await paymentsWithKey(id)).toEqual([]);
    const person = new PageVisitor();
    await person.decide(link, 'approve', await person.signIn(link, TENANT));
    expect((await legacy(paymentArgs(id))).result!.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect((await legacy(paymentArgs(id))).result!.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(await paymentsWithKey(id)).toHaveLength(1);
  });

  it('declined on the page: CONFIRMATION_DECLINED, nothing paid, and the key stays free', async () => {
    const id = await operationId();
    const link = (await legacy(paymentArgs(id))).result!.structuredContent.approval_url as string;
    const person = new PageVisitor();
    await person.decide(link, 'decline', await person.signIn(link, TENANT));
    expect((await legacy(paymentArgs(id))).result).toMatchObject({
      isError: true,
      structuredContent: { outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } },
    });
    expect(await paymentsWithKey(id)).toEqual([]);
    expect(await stack.services.store.get({ tenant: TENANT, tool: PAY, idempotencyKey: id })).toBeUndefined();
  });
});

async function issue(client: Awaited<ReturnType<typeof connectModernClient>>) {
  const result = (await client.callTool({ name: 'issue_operation_id', arguments: { tool: PAY } })) as {
    structuredContent: { operation_id: string };
  };
  return result.structuredContent.operation_id;
}
