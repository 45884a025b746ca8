import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PageVisitor } from '../support/approval';
import { callWrite, rawToolCall, type RawToolAnswer } from '../support/mcp';
import { newKey, sdkClient, startEverythingGateway, type EverythingGateway, type HttpRelay, type TestGateway } from './support';

/**
 * A gateway write with `confirmation: "approval"`: a person of the tenant approves each call on the gateway's approval
 * page (signed in at the local dev issuer) before the upstream sees it. The judge is the HTTP relay in front of
 * server-everything, which records every `tools/call` that reached the upstream.
 */
const policy = {
  tools: {
    echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000, confirmation: 'approval', summary: 'Echo {{message}} to the vendor' },
  },
};
const TENANT = 'demo';

let setup: EverythingGateway;
let relay: HttpRelay;
let gateway: TestGateway;
let token: string;

beforeAll(async () => {
  setup = await startEverythingGateway({
    policy,
    credentials: { tenants: { '*': { header: { name: 'Authorization', value: 'Bearer upstream-credential' } } } },
  });
  ({ relay, gateway } = setup);
  token = await gateway.tokenFor(TENANT);
});
afterAll(() => setup?.stop());

const echoes = (message: string) => setup.echoes(message);
/** One raw 2026-07-28 tools/call of a client that opens links (URL elicitation). */
const call = (args: Record<string, unknown>, round: { requestState?: string; inputResponses?: unknown } = {}) =>
  rawToolCall(gateway.mcpUrl, token, 'echo', args, round);
const linkOf = (answer: RawToolAnswer) => answer.inputRequests!.confirm.params.url;
const yes = { confirm: { action: 'accept' } };

describe('gateway write with confirmation: approval', () => {
  it('nothing reaches the upstream before the person approves on the page; once approved, exactly one call', async () => {
    const message = `approve ${newKey()}`;
    const args = { message, idempotency_key: newKey() };
    const first = await call(args);
    expect(first).toMatchObject({
      resultType: 'input_required',
      inputRequests: { confirm: { method: 'elicitation/create', params: { mode: 'url' } } },
    });
    expect(first.inputRequests!.confirm.params.message).toContain(`Echo "${message}" to the vendor`);
    const link = linkOf(first);
    expect(link.startsWith(`${gateway.url}/approvals/`)).toBe(true);

    // The client says yes before the person decided: still nothing sent, the same link again.
    const early = await call(args, { requestState: first.requestState, inputResponses: yes });
    expect(early).toMatchObject({ resultType: 'input_required' });
    expect(linkOf(early)).toBe(link);
    expect(echoes(message)).toHaveLength(0);

    const person = new PageVisitor();
    const page = await person.signIn(link, TENANT, 'alice');
    expect(page).toContain(`Echo &quot;${message}&quot; to the vendor`);
    expect(echoes(message)).toHaveLength(0);
    expect((await person.decide(link, 'approve', page)).status).toBe(200);
    // Approval alone sends nothing: the agent's next round does.
    expect(echoes(message)).toHaveLength(0);

    const done = await call(args, { requestState: first.requestState, inputResponses: yes });
    expect(done.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(echoes(message)).toHaveLength(1);
    const replay = await call(args);
    expect(replay.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(echoes(message)).toHaveLength(1);
  });

  it('a declined approval sends nothing: rejected CONFIRMATION_DECLINED, and nothing reaches the upstream', async () => {
    const message = `decline ${newKey()}`;
    const args = { message, idempotency_key: newKey() };
    const first = await call(args);
    const link = linkOf(first);
    const person = new PageVisitor();
    expect((await person.decide(link, 'decline', await person.signIn(link, TENANT, 'bob'))).status).toBe(200);
    const refused = await call(args, { requestState: first.requestState, inputResponses: yes });
    expect(refused.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } });
    expect(echoes(message)).toHaveLength(0);
    expect(relay.calls.filter((c) => c.name === 'echo' && String(c.arguments.message).startsWith('decline '))).toHaveLength(0);
  });

  it.each([
    ['form elicitation only (Claude Code)', { elicitation: { form: {} } }],
    ['no elicitation (claude.ai)', {}],
  ])(
    'a client declaring %s gets the link as a tool result; the upstream sees the call once, after the person approved',
    async (_case, capabilities) => {
      const message = `link ${newKey()}`;
      const args = { message, idempotency_key: newKey() };
      const first = await rawToolCall(gateway.mcpUrl, token, 'echo', args, {}, capabilities);
      // A plain result (not a JSON-RPC error a client may hide), with the gateway's page link and what to do with it.
      expect(first).toMatchObject({
        isError: false,
        structuredContent: { outcome: 'in_progress', retryable: true, error: { code: 'APPROVAL_REQUIRED' } },
      });
      const link = first.structuredContent!.approval_url as string;
      expect(link.startsWith(`${gateway.url}/approvals/`)).toBe(true);
      expect(JSON.stringify(first.content)).toContain(`Ask the person to open this link, then call again with the same key: ${link}`);
      // Retried before the person decided: the same link, and nothing sent upstream.
      expect((await rawToolCall(gateway.mcpUrl, token, 'echo', args, {}, capabilities)).structuredContent).toMatchObject({
        approval_url: link,
      });
      expect(echoes(message)).toHaveLength(0);

      const person = new PageVisitor();
      expect((await person.decide(link, 'approve', await person.signIn(link, TENANT, 'carol'))).status).toBe(200);
      expect((await rawToolCall(gateway.mcpUrl, token, 'echo', args, {}, capabilities)).structuredContent).toMatchObject({
        outcome: 'succeeded',
        replayed: false,
      });
      expect((await rawToolCall(gateway.mcpUrl, token, 'echo', args, {}, capabilities)).structuredContent).toMatchObject({
        outcome: 'succeeded',
        replayed: true,
      });
      expect(echoes(message)).toHaveLength(1);
    },
  );

  it('a plain v2 SDK client (2025-11-25) gets the link as a tool result; declined, nothing reaches the upstream', async () => {
    const plain = await sdkClient(gateway, TENANT);
    const message = `plain client ${newKey()}`;
    const args = { message, idempotency_key: newKey() };
    try {
      const asked = await callWrite(plain, 'echo', args);
      expect(asked).toMatchObject({
        outcome: 'in_progress',
        error: { code: 'APPROVAL_REQUIRED' },
        approval_url: expect.stringMatching(new RegExp(`^${gateway.url}/approvals/`)),
      });
      const person = new PageVisitor();
      await person.decide(asked.approval_url!, 'decline', await person.signIn(asked.approval_url!, TENANT, 'dave'));
      expect(await callWrite(plain, 'echo', args)).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } });
    } finally {
      await plain.close();
    }
    expect(echoes(message)).toHaveLength(0);
  });
});
