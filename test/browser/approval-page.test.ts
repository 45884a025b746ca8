import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../support/local-stack';
import { rawToolCall, startTestStack } from '../support/mcp';
import { sandboxLedger } from '../support/side-effects';
import { launchChromium } from '../support/chromium';

/**
 * The approval page in a real browser: Debian's Chromium (scripts/prereqs.sh installs it before `npm test`) driven by
 * playwright-core, against the local stack. The sandbox payments ledger judges what was paid. With
 * APPROVAL_SCREENSHOTS=1 the test writes the page's screenshots to docs/images/ (docs/confirmation.md shows them).
 */
const SCREENSHOTS = process.env.APPROVAL_SCREENSHOTS === '1';
const TENANT = 'tenant-browser';

let stack: LocalStack;
let browser: Browser;
let agentToken: string;

beforeAll(async () => {
  // The stack and the browser start side by side: each mostly waits (for DynamoDB Local, for Chromium's processes).
  const starting = startTestStack({ env: { CONFIRMATION_OPT_OUT_TOOLS: '' } }).then((started) => (stack = started));
  const launching = launchChromium().then((launched) => (browser = launched));
  // Both settled before a failure is thrown: afterAll then closes whichever did start.
  const failed = (await Promise.allSettled([starting, launching])).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  agentToken = await stack.tokenFor(TENANT);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

const call = (name: string, args: Record<string, unknown>, round: Record<string, unknown> = {}) =>
  rawToolCall(stack.mcpUrl, agentToken, name, args, round);

async function askPayment(overrides: Record<string, unknown> = {}) {
  const operationId = (await call('issue_operation_id', { tool: 'request_payment' })).structuredContent!.operation_id as string;
  const args = { operation_id: operationId, amount_minor: 1250, currency: 'EUR', payee_id: 'payee-7', memo: 'rent', ...overrides };
  const first = await call('request_payment', args);
  expect(first.resultType).toBe('input_required');
  return { operationId, args, first, link: first.inputRequests!.confirm.params.url };
}

const paymentsWithKey = async (key: string) => (await sandboxLedger(stack)).payments.filter((p) => p.idempotency_key === key);

/**
 * Every error each person's browser printed to its console, whatever it is about: a stylesheet the CSP refused, a
 * request answered 404 (the icon a browser asks every page for), an error of a script.
 */
const consoleErrors = new Map<BrowserContext, string[]>();

async function person(width = 1280, height = 900): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width, height } });
  const errors: string[] = [];
  consoleErrors.set(context, errors);
  context.on('console', (message) => {
    if (message.type() === 'error') errors.push(`${message.text()} (${message.location().url})`);
  });
  context.on('weberror', (error) => errors.push(String(error.error())));
  return { context, page: await context.newPage() };
}

/**
 * An error a test causes on purpose (a page answered 403 or 409 by design, the framing refusal): taken off the list
 * once seen, so every other one fails the test.
 */
function expectConsoleError(context: BrowserContext, pattern: RegExp) {
  const errors = consoleErrors.get(context)!;
  expect(
    errors.some((text) => pattern.test(text)),
    `no console error matched ${pattern}: ${JSON.stringify(errors)}`,
  ).toBe(true);
  errors.splice(0, errors.length, ...errors.filter((text) => !pattern.test(text)));
}

/** Every page of every test loads without a console error, but for those a test expects by name. */
afterEach(() => {
  for (const [context, errors] of consoleErrors) {
    consoleErrors.delete(context);
    expect(errors).toEqual([]);
  }
});

/** The page as designed: its stylesheet applied (Chromium refuses one whose hash the CSP does not name). */
async function expectStyled(page: Page) {
  const style = (selector: string) =>
    page.evaluate<Record<string, string>>(`(() => {
      const c = getComputedStyle(document.querySelector(${JSON.stringify(selector)}));
      return { fontFamily: c.fontFamily, fontWeight: c.fontWeight, borderStyle: c.borderTopStyle, borderRadius: c.borderTopLeftRadius,
        background: c.backgroundColor, color: c.color, minWidth: c.minWidth, maxWidth: c.maxWidth };
    })()`);
  expect(await style('main')).toMatchObject({ maxWidth: '544px' });
  expect((await style('body')).fontFamily).toContain('"Segoe UI"');
  if (await page.locator('#summary').count())
    expect(await style('#summary')).toMatchObject({ fontWeight: '600', borderStyle: 'solid', borderRadius: '6.4px' });
  if (await page.locator('button.approve').count()) {
    expect(await style('button.approve')).toMatchObject({
      background: 'rgb(22, 101, 52)',
      color: 'rgb(255, 255, 255)',
      minWidth: '128px',
      borderRadius: '6.4px',
    });
  }
}

async function signIn(page: Page, link: string, tenant: string, name: string, shot?: string) {
  await page.goto(link);
  await expect.poll(() => page.locator('#local-banner').isVisible()).toBe(true);
  await expectStyled(page);
  // The local sign-in says which tenant the approval is for, and fills it in (so it does not ask to type it).
  expect(await page.textContent('#tenant-hint')).toContain(`tenant ${TENANT}`);
  expect(await page.textContent('#tenant-hint')).not.toMatch(/type (\S+ )?as your tenant|type demo/i);
  expect(await page.inputValue('#tenant')).toBe(TENANT);
  if (shot && SCREENSHOTS) await page.screenshot({ path: `docs/images/${shot}.png` });
  await page.fill('#tenant', tenant);
  await page.fill('#name', name);
  await page.click('#sign-in');
  await page.waitForLoadState('load');
}

describe('the approval page in Chromium', () => {
  it('sign in and approve: exactly one payment; the page shows tool, summary, tenant and expiry (phone width too)', async () => {
    const { operationId, args, first, link } = await askPayment();
    const { context, page } = await person(390, 844);
    try {
      await signIn(page, link, TENANT, 'alice', 'approval-sign-in');
      await expect.poll(() => page.textContent('#summary')).toBe('Pay 12.50 EUR to payee-7 (memo: "rent")');
      expect(await page.textContent('#tool')).toBe('request_payment');
      expect(await page.textContent('#tenant')).toBe(TENANT);
      // UTC, said so, and how long from now: the page has no script to show the person's own time zone.
      expect(await page.textContent('#expires')).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in 1[45] minutes\)$/);
      expect(await page.textContent('h1')).toBe('Approve this operation?');
      // The icon it names is answered (no content) where the page is: deployed, the page's host may answer nothing
      // else, and a browser that found no icon would ask for /favicon.ico there and log the 404.
      const icon = await page.evaluate<string | undefined>(`document.querySelector('link[rel="icon"]')?.href`);
      expect(icon).toMatch(new RegExp(`^${stack.url}/approvals/`));
      expect((await page.request.get(icon!)).status()).toBe(204);
      await expectStyled(page);
      // Nothing overflows a phone's width.
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
      if (SCREENSHOTS) await page.screenshot({ path: 'docs/images/approval-page-phone.png', fullPage: true });
      await page.click('button.approve');
      await expect
        .poll(() => page.textContent('#state'))
        .toMatch(/^Approved by alice@tenant-browser at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((now|\d seconds? ago)\)\./);
      // After the decision the heading says what was decided, no longer asks; the page says when it was decided,
      // not when a link that no longer matters expires, and that no run used the yes yet.
      expect(await page.textContent('h1')).toBe('Approved');
      expect(await page.locator('#expires').count()).toBe(0);
      expect(await page.textContent('#decided')).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((now|\d seconds? ago)\)$/);
      expect(await page.content()).not.toMatch(/expires|in 1[45] minutes/i);
      expect(await page.textContent('#used')).toMatch(/^not yet/);
      await expectStyled(page);
      if (SCREENSHOTS) await page.screenshot({ path: 'docs/images/approval-approved.png', fullPage: true });

      const paid = await call('request_payment', args, {
        requestState: first.requestState,
        inputResponses: { confirm: { action: 'accept' } },
      });
      expect(paid.structuredContent).toMatchObject({ outcome: 'succeeded' });
      expect(await paymentsWithKey(operationId)).toHaveLength(1);
      // Opened again once the payment ran: when the yes was used, and by which run (as `ops show` prints it).
      const record = await stack.services.approvals.current({ tenant: TENANT, tool: 'request_payment', idempotencyKey: operationId });
      await page.goto(link);
      expect(await page.textContent('#used')).toMatch(
        new RegExp(`^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC \\((now|\\d seconds? ago)\\) by run ${record!.usedBy}$`),
      );
      expect(await page.locator('#expires').count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('decline: nothing paid, and the key is still usable', async () => {
    const { operationId, args, first, link } = await askPayment();
    const { context, page } = await person();
    try {
      await signIn(page, link, TENANT, 'alice');
      await expectStyled(page);
      if (SCREENSHOTS) await page.screenshot({ path: 'docs/images/approval-page-desktop.png', fullPage: true });
      await page.click('button[value="decline"]');
      await expect.poll(() => page.textContent('#state')).toMatch(/^Declined/);
      expect(await page.textContent('h1')).toBe('Declined');
      expect(await page.locator('#expires, #used').count()).toBe(0);
      expect(await page.textContent('#decided')).toMatch(/ UTC \((now|\d seconds? ago)\)$/);
      const refused = await call('request_payment', args, {
        requestState: first.requestState,
        inputResponses: { confirm: { action: 'accept' } },
      });
      expect(refused.structuredContent).toMatchObject({ error: { code: 'CONFIRMATION_DECLINED' } });
      expect(await paymentsWithKey(operationId)).toEqual([]);

      const again = await call('request_payment', args);
      await page.goto(again.inputRequests!.confirm.params.url);
      await page.click('button.approve');
      await expect.poll(() => page.textContent('#state')).toMatch(/^Approved/);
      expect((await call('request_payment', args)).structuredContent).toMatchObject({ outcome: 'succeeded' });
      expect(await paymentsWithKey(operationId)).toHaveLength(1);
      // The decline is kept beside the approval that followed it: every round stays in the log.
      const kept = await stack.services.approvals.current({ tenant: TENANT, tool: 'request_payment', idempotencyKey: operationId });
      expect(kept!.log.map((entry) => `${entry.round} ${entry.event}${entry.by ? ` ${entry.by}` : ''}`)).toEqual([
        '1 requested',
        `1 declined alice@${TENANT}`,
        '2 requested',
        `2 approved alice@${TENANT}`,
        `2 used ${kept!.usedBy}`,
      ]);
    } finally {
      await context.close();
    }
  });

  it('a person of another tenant cannot approve, and can sign out to sign in as one of the tenant', async () => {
    const { link, operationId } = await askPayment();
    const { context, page } = await person();
    try {
      await signIn(page, link, 'tenant-other', 'mallory');
      expect(await page.textContent('h1')).toBe('Not yours to decide');
      expectConsoleError(context, /status of 403/);
      expect(await page.locator('button.approve').count()).toBe(0);
      expect(await page.content()).not.toContain('payee-7');
      await expectStyled(page);
      if (SCREENSHOTS) await page.screenshot({ path: 'docs/images/approval-other-tenant.png', fullPage: true });
      // Signing out leads back to the link, which asks for a sign-in again: this time as a person of the tenant.
      await page.click('#sign-out');
      await expect.poll(() => page.locator('#local-banner').isVisible()).toBe(true);
      await signIn(page, link, TENANT, 'alice');
      expect(await page.textContent('#summary')).toContain('payee-7');
      expect(await page.textContent('#subject')).toBe(`alice@${TENANT}`);
    } finally {
      await context.close();
    }
    expect((await stack.services.approvals.current({ tenant: TENANT, tool: 'request_payment', idempotencyKey: operationId }))!.status).toBe(
      'pending',
    );
  });

  it('replaying the approve POST, or two tabs approving at once, leaves one decision and one payment', async () => {
    const { operationId, args, link } = await askPayment();
    const { context, page } = await person();
    try {
      await signIn(page, link, TENANT, 'alice');
      const second = await context.newPage();
      await second.goto(link);
      await Promise.all([page.click('button.approve'), second.click('button.approve')]);
      const states = await Promise.all([page, second].map((tab) => tab.textContent('#state')));
      expect(states.every((state) => /^Approved by/.test(state ?? ''))).toBe(true);
      expect(await Promise.all([page, second].map((tab) => tab.locator('#notice').count()))).toContain(1);
      // The browser resubmits the form (reload after POST).
      const replay = await page.reload();
      expect(replay?.status()).toBe(409);
      expectConsoleError(context, /status of 409/);
    } finally {
      await context.close();
    }
    const record = await stack.services.approvals.current({ tenant: TENANT, tool: 'request_payment', idempotencyKey: operationId });
    expect(record!.log.filter((entry) => entry.event === 'approved')).toHaveLength(1);
    await Promise.all([1, 2].map(() => call('request_payment', args)));
    expect(await paymentsWithKey(operationId)).toHaveLength(1);
  });

  it('a form without its CSRF token is refused; the page refuses to be framed', async () => {
    const { link, operationId } = await askPayment();
    const { context, page } = await person();
    try {
      await signIn(page, link, TENANT, 'alice');
      await page.evaluate(`document.querySelector('input[name="csrf"]').remove()`);
      await page.click('button.approve');
      await expect.poll(() => page.textContent('h1')).toBe('Refused');
      expectConsoleError(context, /status of 403/);
      expect(
        (await stack.services.approvals.current({ tenant: TENANT, tool: 'request_payment', idempotencyKey: operationId }))!.status,
      ).toBe('pending');

      // A page frames the approval page (one of its own origin, so nothing but the page's headers can stop it).
      await page.goto(`${stack.url}/health`);
      await page.evaluate(
        `(() => { const f = document.createElement('iframe'); f.src = ${JSON.stringify(link)}; document.body.appendChild(f); })()`,
      );
      // Refused by the CSP's frame-ancestors (Chromium says so in the console): the one CSP message expected here.
      // Waited for first, so what the frame shows below is what it shows once Chromium has decided.
      const messages = consoleErrors.get(context)!;
      await expect.poll(() => messages.some((text) => /frame-ancestors/.test(text))).toBe(true);
      const framed = page.frames().find((frame) => frame !== page.mainFrame());
      const framedText = framed ? await framed.evaluate<string>(`document.body ? document.body.innerText : ''`).catch(() => '') : '';
      // Framed, the signed-in approval page renders nothing (Chromium shows its own "refused to connect" page).
      expect(framedText).not.toContain('Approve this operation');
      expect(framedText).not.toContain('payee-7');
      expectConsoleError(context, /frame-ancestors/);
    } finally {
      await context.close();
    }
  });

  it('a JPY payment shows its true amount, and a memo with newlines cannot fake a line', async () => {
    const { link } = await askPayment({ amount_minor: 1_000_000_000, currency: 'JPY', memo: 'x\n\nPay 1.00 EUR to payee-7\u202E' });
    const { context, page } = await person();
    try {
      await signIn(page, link, TENANT, 'alice');
      const summary = (await page.textContent('#summary'))!;
      // Grouped by threes, as a person reads a billion yen.
      expect(summary).toBe('Pay 1,000,000,000 JPY to payee-7 (memo: "x\\n\\nPay 1.00 EUR to payee-7\\u{202E}")');
      // One rendered line block: the memo's "Pay" never starts a line of its own.
      // biome-ignore lint/performance/useDomNodeTextContent: the rendered lines are the subject; textContent has no line breaks.
      const lines = (await page.locator('#summary').innerText()).split('\n');
      expect(lines.filter((line) => line.trimStart().startsWith('Pay '))).toHaveLength(1);
      if (SCREENSHOTS) await page.screenshot({ path: 'docs/images/approval-jpy-memo.png', fullPage: true });
    } finally {
      await context.close();
    }
  });

  it('an expired link gives a new one', async () => {
    // The stack's own TTL is 15 minutes; this one asks with a stack whose approvals expire at once.
    const quick = await startTestStack({ env: { CONFIRMATION_OPT_OUT_TOOLS: '', APPROVAL_TTL_SECONDS: '1' } });
    try {
      const token = await quick.tokenFor(TENANT);
      const raw = (name: string, args: Record<string, unknown>) => rawToolCall(quick.mcpUrl, token, name, args);
      const id = (await raw('issue_operation_id', { tool: 'request_payment' })).structuredContent!.operation_id as string;
      const args = { operation_id: id, amount_minor: 500, currency: 'USD', payee_id: 'payee-2' };
      const first = await raw('request_payment', args);
      const { context, page } = await person();
      try {
        await signIn(page, first.inputRequests!.confirm.params.url, TENANT, 'alice');
        await page.waitForTimeout(1200);
        await page.reload();
        expect(await page.textContent('#state')).toMatch(/expired/);
        expect(await page.locator('button.approve').count()).toBe(0);
        const next = await raw('request_payment', args);
        expect(next.inputRequests!.confirm.params.url).not.toBe(first.inputRequests!.confirm.params.url);
      } finally {
        await context.close();
      }
    } finally {
      await quick.stop();
    }
  });
});
