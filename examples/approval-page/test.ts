/**
 * What the example promises, checked against a running server and the stand-in issuer: a payment runs only after a
 * person of the tenant approves it on the page, exactly once. A 2026-07-28 client that can open links (URL-mode
 * elicitation) gets the link and retries once the person decided; a client that cannot (form only, none, 2025-11-25)
 * gets it as a tool result (APPROVAL_REQUIRED) to show. A person of another tenant cannot decide; a decline pays nothing.
 * Run: DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npm test
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { type Person, type StandInIssuer, startStandInIssuer } from './issuer.js';
import { startPaymentServer, type StartedServer } from './server.js';

/**
 * A person's browser on the approval link, by plain HTTP: the page sends them to sign in, the issuer back, the page
 * shows what they approve; they press `decision`. Returns the page's answer to each step that a person reads.
 */
export async function decideOnPage(issuer: StandInIssuer, link: string, person: Person, decision: 'approve' | 'decline') {
  issuer.signInAs(person);
  const cookies = new Map<string, string>();
  const go = async (url: string, init: RequestInit = {}): Promise<Response> => {
    const response = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: { ...init.headers, Cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const [name, value] = pair!.split('=');
      if (value) cookies.set(name!, value);
      else cookies.delete(name!);
    }
    const next = response.headers.get('location');
    return next && response.status >= 300 && response.status < 400 ? go(new URL(next, url).toString()) : response;
  };
  const shown = await go(link);
  const html = await shown.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  if (!csrf) return { status: shown.status, html };
  const decided = await go(link, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: new URL(link).origin },
    body: new URLSearchParams({ csrf, decision }).toString(),
  });
  return { status: decided.status, shown: html, html: await decided.text() };
}

async function connect(server: StartedServer, era: '2026-07-28' | '2025-11-25', onLink?: (url: string) => Promise<void>): Promise<Client> {
  const client = new Client(
    { name: 'example-test', version: '1' },
    { versionNegotiation: { mode: era === '2026-07-28' ? { pin: era } : 'legacy' }, capabilities: { elicitation: { url: {} } } },
  );
  // The agent's host shows the link to the person; here the person decides at once, then the SDK retries the call.
  client.setRequestHandler('elicitation/create', async (request) => {
    const params = request.params as { mode?: string; url?: string };
    if (params.mode !== 'url' || !params.url || !onLink) return { action: 'decline' };
    await onLink(params.url);
    return { action: 'accept' };
  });
  const headers = { Authorization: `Bearer ${server.tokenFor('acme')}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
  return client;
}

type Answer = { outcome: string; replayed?: boolean; error?: { code: string }; result?: { payment_id: string }; approval_url?: string };
const pay = async (client: Client, args: Record<string, unknown>) =>
  (await client.callTool({ name: 'pay_invoice', arguments: args })).structuredContent as Answer;

export async function checkApprovedOnce(server: StartedServer, issuer: StandInIssuer): Promise<void> {
  const pages: string[] = [];
  const client = await connect(server, '2026-07-28', async (link) => {
    const outsider = await decideOnPage(issuer, link, { sub: 'mallory', tenant: 'globex' }, 'approve');
    assert.equal(outsider.status, 403, 'a person of another tenant saw the approval');
    const decided = await decideOnPage(issuer, link, { sub: 'alice', tenant: 'acme' }, 'approve');
    assert.equal(decided.status, 200, decided.html);
    pages.push(decided.shown!);
  });
  try {
    const args = { idempotency_key: `pay-${randomUUID()}`, supplier: 'acme-supplies', amount_minor: 4200, currency: 'EUR' };
    const paid = await pay(client, args);
    assert.equal(paid.outcome, 'succeeded', JSON.stringify(paid));
    assert.match(pages[0]!, /Pay 42\.00 EUR to acme-supplies/);
    const again = await pay(client, args);
    assert.equal(again.replayed, true, JSON.stringify(again));
    assert.equal(pages.length, 1, 'the retry asked the person again');
    assert.equal([...server.services.payments.byKey.values()].filter((p) => p.payment_id === paid.result!.payment_id).length, 1);
  } finally {
    await client.close();
  }
}

export async function checkLegacyLinkAndDecline(server: StartedServer, issuer: StandInIssuer): Promise<void> {
  const client = await connect(server, '2025-11-25');
  try {
    const args = { idempotency_key: `pay-${randomUUID()}`, supplier: 'acme-supplies', amount_minor: 990, currency: 'USD' };
    // A plain tool result (not an error a client may hide): the link, for the model to pass to the person.
    const linkOf = async () => {
      const answer = await client.callTool({ name: 'pay_invoice', arguments: args });
      const asked = answer.structuredContent as Answer;
      assert.equal(asked.error?.code, 'APPROVAL_REQUIRED', `paid without the person: ${JSON.stringify(answer)}`);
      assert.equal(answer.isError, false);
      return asked.approval_url!;
    };
    const link = await linkOf();
    assert.equal(await linkOf(), link, 'a retry before the decision got another link');
    const declined = await decideOnPage(issuer, link, { sub: 'alice', tenant: 'acme' }, 'decline');
    assert.match(declined.html, /Declined by alice/);
    const refused = await pay(client, args);
    assert.equal(refused.error?.code, 'CONFIRMATION_DECLINED', JSON.stringify(refused));
    assert.equal(server.services.payments.byKey.has(`acme/${args.idempotency_key}`), false, 'a declined payment ran');
  } finally {
    await client.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const issuer = await startStandInIssuer();
  const server = await startPaymentServer({ signIn: issuer.signIn });
  try {
    await checkApprovedOnce(server, issuer);
    console.log('passed: a payment runs once, after a person of the tenant approved it on the page; another tenant cannot');
    await checkLegacyLinkAndDecline(server, issuer);
    console.log('passed: a 2025-11-25 client gets the link as a tool result (APPROVAL_REQUIRED); a decline pays nothing');
  } finally {
    await server.stop();
    await issuer.stop();
  }
}
