import { afterAll, beforeAll, expect, it } from 'vitest';
import { startLocalStack, type LocalStack } from '../support/local-stack';
import { runDemo } from '../../scripts/demo-agent';

let stack: LocalStack;
beforeAll(async () => {
  // Short periods so the payment's reconciliation takes a fraction of a second instead of one 5 s period.
  stack = await startLocalStack({ env: { RECONCILE_INTERVAL_MS: '200', DOWNSTREAM_TIMEOUT_MS: '300' } });
});
afterAll(() => stack?.stop());

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

it('the demo of `npm run demo` makes one effect per intent through every fault', async () => {
  const lines: string[] = [];
  const report = await runDemo({
    mcpUrl: stack.mcpUrl,
    token: await stack.tokenFor('demo'),
    log: (line) => lines.push(line),
    // The server asks for 5 s before asking again about an unknown payment; polling every 200 ms keeps the test short.
    sleep: (ms) => sleep(Math.min(ms, 200)),
    retry: { maxAttempts: 60 },
    deliveryTimeoutMs: 15_000,
  });
  const output = lines.join('\n');

  expect(report.checks).toEqual([
    { intent: 'the order', section: 'orders', effects: 1 },
    { intent: 'the confirmation email', section: 'emails', effects: 1 },
    { intent: 'the payment', section: 'payments', effects: 1 },
  ]);
  expect(report.ok).toBe(true);
  // Each fault was really met, and the retry or re-plan got the first result back.
  expect(output).toMatch(/attempt 1: create_order ik_\S+ : unknown, no answer \(network error ECONNRESET\)/);
  expect(output).toMatch(/=> create_order ik_\S+ : succeeded \(replayed\), order_id /);
  expect(output).toMatch(
    /=> send_email (ik_\S+) : succeeded, [^\n]*\n[^\n]*re-planned[^\n]*\n\s+=> send_email \1 : succeeded \(replayed\)/,
  );
  // The payment waited for the person's approval on the page (URL mode), then ran once.
  expect(output).toMatch(
    /approval needed: "Pay 24\.90 EUR to payee-\S+ \(memo: "order [^"]+"\)"\n\s+link: http:\/\/\S+\/approvals\/\S+\n\s+the person signed in/,
  );
  expect(output).toMatch(/attempt 1: request_payment op_\S+ : unknown, being verified/);
  expect(output).toMatch(/=> request_payment op_\S+ : succeeded \(replayed\), payment_id /);
}, 60_000);
