import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callWrite, connectClient, connectModernClient, rawToolCall, URL_ELICITATION } from '../support/mcp';
import { PageVisitor } from '../support/approval';
import {
  FixtureTool,
  fixtureOrder,
  fixturePaymentArgs as paymentArgs,
  startFixtureStack,
  type FixtureStack,
} from '../support/fixture-tools';
import { issueOperationId } from '../support/side-effects';

/**
 * Form-mode confirmation end to end on the local stack, with the fixture downstream's bookings as the judge:
 * fixture_payment (confirmation: 'approval') with the operator's form fallback allowed for it, so a 2026-07-28 client
 * without URL elicitation is asked through a form, and only a yes pays; a client that can show no form (none declared, 2025-era)
 * gets the approval page's link as a tool result. The approval
 * page itself: test/integration/mcp-approval.test.ts.
 */
const PAY = FixtureTool.payment;
let stack: FixtureStack;
const TENANT = 'tenant-confirm';
/** How far the server's clock runs ahead of this one (a test moves it to let a confirmation expire). */
let clockAheadMs = 0;
type Answer = { action: 'accept' | 'decline' | 'cancel'; content?: Record<string, boolean> };

beforeAll(async () => {
  // No opt-out: every client of this deployment confirms through the server.
  stack = await startFixtureStack({
    env: { CONFIRMATION_OPT_OUT_TOOLS: '', CONFIRMATION_FORM_FALLBACK_TOOLS: PAY },
    services: { clock: () => Date.now() + clockAheadMs },
  });
});
afterAll(() => stack?.stop());

/** The payments the downstream holds under this key (what was paid, whatever the endpoint answered). */
async function paymentsWithKey(key: string) {
  return stack.downstream.bookings(key);
}

/** A v2 client whose person answers every confirmation with `answer`; `asked` collects what they were shown. */
async function personSaying(answer: () => Answer) {
  const asked: string[] = [];
  const client = await connectModernClient(stack, TENANT, {
    onConfirm: (message) => {
      asked.push(message);
      return answer();
    },
  });
  return { client, asked };
}

describe('a 2026-07-28 client is asked to confirm', () => {
  it('accept pays once; a retry after acceptance replays without asking again', async () => {
    const { client, asked } = await personSaying(() => ({ action: 'accept', content: { confirm: true } }));
    try {
      const operationId = await issueOperationId(client, PAY);
      const paid = await callWrite<{ payment_id: string }>(client, PAY, paymentArgs(operationId));
      expect(paid).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain('Pay 12.50 EUR to payee-7 (memo: "rent")');
      expect(await paymentsWithKey(operationId)).toHaveLength(1);

      const retry = await callWrite<{ payment_id: string }>(client, PAY, paymentArgs(operationId));
      expect(retry).toMatchObject({ outcome: 'succeeded', replayed: true, result: { payment_id: paid.result!.payment_id } });
      expect(asked).toHaveLength(1);
      expect(await paymentsWithKey(operationId)).toHaveLength(1);
      // The replay never reached the downstream.
      expect(stack.downstream.calls(operationId)).toBe(1);
    } finally {
      await client.close();
    }
  });

  it.each([
    ['declines', { action: 'decline' } as Answer],
    ['cancels', { action: 'cancel' } as Answer],
    ['accepts without ticking yes', { action: 'accept', content: { confirm: false } } as Answer],
  ])('the person %s: rejected CONFIRMATION_DECLINED, nothing paid nor recorded, and the key stays free', async (_case, refusal) => {
    let answer = refusal;
    const { client, asked } = await personSaying(() => answer);
    try {
      const operationId = await issueOperationId(client, PAY);
      const refused = await callWrite(client, PAY, paymentArgs(operationId));
      expect(refused).toMatchObject({ outcome: 'rejected', retryable: false, error: { code: 'CONFIRMATION_DECLINED' } });
      expect(await paymentsWithKey(operationId)).toEqual([]);
      expect(await stack.services.store.get({ tenant: TENANT, tool: PAY, idempotencyKey: operationId })).toBeUndefined();

      // The person changes their mind: the same operation id runs, once, and they were asked again.
      answer = { action: 'accept', content: { confirm: true } };
      const paid = await callWrite(client, PAY, paymentArgs(operationId));
      expect(paid).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(asked).toHaveLength(2);
      expect(await paymentsWithKey(operationId)).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('a client that declares no elicitation gets the approval link as a tool result (the form fallback needs a form); nothing is paid', async () => {
    const client = await connectModernClient(stack, TENANT);
    try {
      const operationId = await issueOperationId(client, PAY);
      const asked = await callWrite(client, PAY, paymentArgs(operationId));
      expect(asked).toMatchObject({
        outcome: 'in_progress',
        retryable: true,
        error: { code: 'APPROVAL_REQUIRED' },
        approval_url: expect.stringContaining('/approvals/'),
      });
      expect(asked.error!.message).toContain('call again with the same key');
      expect(await paymentsWithKey(operationId)).toEqual([]);
      // No form round was opened for a client that cannot show one: the round is the page's.
      expect(await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: operationId })).toMatchObject({
        mode: 'url',
        status: 'pending',
      });
    } finally {
      await client.close();
    }
  });
});

describe('the requestState cannot be forged or moved to other arguments', () => {
  const FORM_CLIENT = { elicitation: { form: {} } };
  const yes = { confirm: { action: 'accept', content: { confirm: true } } };
  let token: string;
  beforeAll(async () => {
    token = await stack.tokenFor(TENANT);
  });

  const call = (args: Record<string, unknown>, round: { requestState?: string; inputResponses?: unknown } = {}) =>
    rawToolCall(stack.mcpUrl, token, PAY, args, round, FORM_CLIENT);
  const operationId = async () =>
    (await rawToolCall(stack.mcpUrl, token, 'issue_operation_id', { tool: PAY }, {}, FORM_CLIENT)).structuredContent!
      .operation_id as string;

  it('the first round asks: input_required with the summary form and a requestState', async () => {
    const first = await call(paymentArgs(await operationId()));
    expect(first).toMatchObject({
      resultType: 'input_required',
      requestState: expect.stringMatching(/^cf1\./),
      inputRequests: {
        confirm: { method: 'elicitation/create', params: { message: expect.stringContaining('Pay 12.50 EUR to payee-7 (memo: "rent")') } },
      },
    });
    // The form shows amounts as the page does: grouped, by the currency's minor units.
    const large = await call(paymentArgs(await operationId(), { currency: 'JPY', amount_minor: 1_000_000_000 }));
    expect(large.inputRequests!.confirm.params).toMatchObject({
      mode: 'form',
      message: expect.stringContaining('Pay 1,000,000,000 JPY to payee-7'),
    });
  });

  it('a forged requestState, or one minted for other arguments, is refused and nothing runs', async () => {
    const id = await operationId();
    const forged = await call(paymentArgs(id), { requestState: `cf1.zzzzzz.${'A'.repeat(22)}.${'B'.repeat(43)}`, inputResponses: yes });
    expect(forged.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_INVALID' } });

    // The person said yes to 12.50 EUR; the answer is replayed for 12 500.00 EUR under the same operation id.
    const { requestState } = (await call(paymentArgs(id))) as { requestState: string };
    const moved = await call(paymentArgs(id, { amount_minor: 1_250_000 }), { requestState, inputResponses: yes });
    expect(moved.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_INVALID' } });
    // And to another operation id (another key).
    const elsewhere = await call(paymentArgs(await operationId()), { requestState, inputResponses: yes });
    expect(elsewhere.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_INVALID' } });
    expect(await paymentsWithKey(id)).toEqual([]);

    // The genuine state with the genuine arguments pays (below: but not once it expired).
    const paid = await call(paymentArgs(id), { requestState, inputResponses: yes });
    expect(paid.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await paymentsWithKey(id)).toHaveLength(1);
  });

  it('a decided round cannot be answered again: a declined requestState sent again with accept pays nothing', async () => {
    const id = await operationId();
    const { requestState } = (await call(paymentArgs(id))) as { requestState: string };
    const no = { confirm: { action: 'decline' } };
    expect((await call(paymentArgs(id), { requestState, inputResponses: no })).structuredContent).toMatchObject({
      error: { code: 'CONFIRMATION_DECLINED' },
    });
    const again = await call(paymentArgs(id), { requestState, inputResponses: yes });
    expect(again.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } });
    expect(await paymentsWithKey(id)).toEqual([]);
    const record = await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: id });
    expect(record).toMatchObject({ mode: 'form', status: 'declined', decidedBy: 'mcp-client' });
  });

  it('a round asked on the approval page is decided only there: the same requestState sent with a form-only declaration and accept pays nothing', async () => {
    const id = await operationId();
    const key = { tenant: TENANT, tool: PAY, idempotencyKey: id };
    const onPage = await rawToolCall(stack.mcpUrl, token, PAY, paymentArgs(id), {}, URL_ELICITATION);
    const link = onPage.inputRequests!.confirm.params.url;
    expect(link).toContain('/approvals/');

    // The client now declares only form elicitation and answers the page's round itself.
    // Its answer counts for nothing: it gets the page's link to show instead, the same one.
    const forged = await call(paymentArgs(id), { requestState: onPage.requestState, inputResponses: yes });
    expect(forged.structuredContent).toMatchObject({ outcome: 'in_progress', error: { code: 'APPROVAL_REQUIRED' }, approval_url: link });
    // Nor can it replace the page's round by one of its own.
    const anew = await call(paymentArgs(id));
    expect(anew.structuredContent).toMatchObject({ outcome: 'in_progress', error: { code: 'APPROVAL_REQUIRED' }, approval_url: link });
    expect(await paymentsWithKey(id)).toEqual([]);
    expect(await stack.services.approvals.current(key)).toMatchObject({ mode: 'url', status: 'pending' });
    expect((await stack.services.approvals.current(key))!.log.map((entry) => entry.event)).toEqual(['requested']);

    // The person approves on the page: then the form-only client's call runs, once.
    const person = new PageVisitor();
    expect((await person.decide(link, 'approve', await person.signIn(link, TENANT, 'alice'))).status).toBe(200);
    expect((await call(paymentArgs(id), { requestState: onPage.requestState, inputResponses: yes })).structuredContent).toMatchObject({
      outcome: 'succeeded',
    });
    expect(await paymentsWithKey(id)).toHaveLength(1);
    expect(await stack.services.approvals.current(key)).toMatchObject({ status: 'approved', decidedBy: `alice@${TENANT}` });
  });

  it('an operation the person declined on the page stays declined for a client that now declares only forms: no form round replaces it', async () => {
    const id = await operationId();
    const onPage = await rawToolCall(stack.mcpUrl, token, PAY, paymentArgs(id), {}, URL_ELICITATION);
    const link = onPage.inputRequests!.confirm.params.url;
    const person = new PageVisitor();
    expect((await person.decide(link, 'decline', await person.signIn(link, TENANT, 'bob'))).status).toBe(200);
    expect((await call(paymentArgs(id), { requestState: onPage.requestState, inputResponses: yes })).structuredContent).toMatchObject({
      error: { code: 'CONFIRMATION_DECLINED' },
    });
    const anew = await call(paymentArgs(id));
    expect(anew.structuredContent).toMatchObject({ outcome: 'rejected', error: { code: 'CONFIRMATION_DECLINED' } });
    expect(await paymentsWithKey(id)).toEqual([]);
    const record = (await stack.services.approvals.current({ tenant: TENANT, tool: PAY, idempotencyKey: id }))!;
    expect(record.log.map((entry) => `${entry.event} ${entry.via}`)).toEqual(['requested url', 'declined url']);
  });

  it('an expired requestState is refused, nothing runs, and calling again asks anew', async () => {
    const id = await operationId();
    const { requestState } = (await call(paymentArgs(id))) as { requestState: string };
    clockAheadMs = 16 * 60_000; // past the approval TTL (APPROVAL_TTL_SECONDS, 15 minutes by default)
    try {
      const late = await call(paymentArgs(id), { requestState, inputResponses: yes });
      expect(late.structuredContent).toMatchObject({
        outcome: 'rejected',
        error: { code: 'CONFIRMATION_INVALID', message: expect.stringMatching(/too late/) },
      });
      expect(await paymentsWithKey(id)).toEqual([]);
      expect(await call(paymentArgs(id))).toMatchObject({ resultType: 'input_required' });
    } finally {
      clockAheadMs = 0;
    }
  });
});

describe('2025-era clients', () => {
  it('a 1.x client (2025-11-25) gets the approval link as a tool result, never a form; nothing is paid until the person approves', async () => {
    const client = await connectClient(stack, TENANT);
    try {
      const operationId = await issueOperationId(client, PAY);
      const asked = await callWrite(client, PAY, paymentArgs(operationId));
      expect(asked).toMatchObject({
        outcome: 'in_progress',
        retryable: true,
        error: { code: 'APPROVAL_REQUIRED' },
        approval_url: expect.stringContaining('/approvals/'),
      });
      expect(await paymentsWithKey(operationId)).toEqual([]);
      const link = asked.approval_url!;
      const person = new PageVisitor();
      await person.decide(link, 'approve', await person.signIn(link, TENANT));
      expect(await callWrite(client, PAY, paymentArgs(operationId))).toMatchObject({ outcome: 'succeeded' });
      expect(await paymentsWithKey(operationId)).toHaveLength(1);
      // Tools without confirmation are unaffected.
      const orderKey = `order-${operationId.slice(-12)}`;
      expect(await callWrite(client, FixtureTool.order, { idempotency_key: orderKey, item: 'S', quantity: 1 })).toMatchObject({
        outcome: 'succeeded',
      });
      expect(await fixtureOrder(stack, TENANT, orderKey)).toMatchObject({ item: 'S', quantity: 1 });
    } finally {
      await client.close();
    }
  });

  it('a client of an earlier version gets the approval link as a tool result too, and nothing is paid', async () => {
    const token = await stack.tokenFor(TENANT);
    const client = await connectClient(stack, TENANT);
    const operationId = await issueOperationId(client, PAY);
    await client.close();
    const response = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${token}`,
        'Mcp-Protocol-Version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: PAY, arguments: paymentArgs(operationId) } }),
    });
    const { result } = (await response.json()) as {
      result: { isError: boolean; structuredContent: { outcome: string; approval_url: string; error: { code: string; message: string } } };
    };
    expect(result).toMatchObject({ isError: false, structuredContent: { outcome: 'in_progress', error: { code: 'APPROVAL_REQUIRED' } } });
    expect(result.structuredContent.error.message).toContain(result.structuredContent.approval_url);
    expect(await paymentsWithKey(operationId)).toEqual([]);
  });
});
