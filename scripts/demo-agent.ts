import { randomBytes } from 'node:crypto';
import { keyHint } from '../client/status-line';
import { CallLedger, IdempotentMcpClient, type AttemptEvent, type RetryOptions, type WriteCall } from 'idempotent-mcp/client';
import { createFaultFetch } from 'idempotent-mcp/client/testing';
import { decideAsLocalPerson } from './local-approver';

/**
 * The scripted agent of `npm run demo` (and of its test): three intents, each through a failure that would
 * double an effect without the client's key discipline, then a check that each made exactly one effect.
 */
export interface DemoOptions {
  mcpUrl: string;
  token: string;
  /** The token's tenant: the person who approves the payment signs in for it at the local dev issuer. Default "demo". */
  tenant?: string;
  /** Where each line goes. Default: console.log. */
  log?: (line: string) => void;
  /** Overrides of the client's retry budget (the payment waits for the reconciler through it). */
  retry?: RetryOptions;
  /** The client's wait between attempts, and the demo's wait while polling for delivery. */
  sleep?: (ms: number) => Promise<void>;
  /** How long to wait for the queued email to be delivered. Default 30 s. */
  deliveryTimeoutMs?: number;
}

export interface IntentCheck {
  intent: string;
  section: 'orders' | 'emails' | 'payments';
  /** Effects found in the sandbox for this intent: exactly 1 is the promise. */
  effects: number;
}

export interface DemoReport {
  checks: IntentCheck[];
  /** Every intent made exactly one effect. */
  ok: boolean;
}

type Entry = Record<string, unknown>;
type SandboxLedger = Record<string, Entry[]>;

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const wait = (ms: number) => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 100) / 10} s`);

export async function runDemo(options: DemoOptions): Promise<DemoReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  const sleep = options.sleep ?? realSleep;
  const sandbox = (path: string) => new URL(`/sandbox/${path}`, options.mcpUrl);
  // Everything this run creates carries its id, so a double under any key or event would be counted.
  const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

  const faults = createFaultFetch();
  // Attempts that are followed by a retry; the last one is the call's own status line.
  const onAttempt = (event: AttemptEvent) => {
    if (event.nextDelayMs !== undefined) log(`   attempt ${event.attempt}: ${event.status} -> retrying in ${wait(event.nextDelayMs)}`);
  };
  const client = new IdempotentMcpClient({
    url: options.mcpUrl,
    token: options.token,
    session: `demo-${run}`,
    ledger: new CallLedger(),
    fetch: faults.fetch,
    // The payment waits for a reconciler period or two: give it room.
    retry: { maxAttempts: 10, maxElapsedMs: 60_000, ...options.retry },
    sleep,
    onAttempt,
    // The payment needs the person's approval on the endpoint's page (MCP URL-mode elicitation). The demo runs
    // unattended, so a local person signs in at the dev issuer and approves there, over HTTP, as a browser would.
    onApprovalLink: async (link) => {
      log(`   approval needed: "${link.message.split('\n')[0]}"`);
      log(`   link: ${link.url}`);
      await decideAsLocalPerson(link.url, { tenant: options.tenant ?? 'demo', decision: 'approve' });
      log('   the person signed in (local dev issuer) and approved on the page; the client retries with the same key');
    },
  });
  const done = (call: WriteCall) => log(`   => ${call.status}`);

  try {
    log(`Idempotent MCP demo against ${options.mcpUrl} (run ${run})`);

    log('\n1. Create an order. The server commits it, but its answer is lost on the way back.');
    faults.inject({ tool: 'create_order', fault: { mode: 'lose-response' }, times: 1 });
    const customerId = `customer-${run}`;
    const order = await client.callWrite<{ order_id: string }>({
      tool: 'create_order',
      args: { customer_id: customerId, items: [{ sku: 'coffee-beans-1kg', quantity: 2 }], currency: 'EUR' },
    });
    done(order);
    const orderId = order.result?.result?.order_id ?? 'unknown-order';

    log('\n2. Send the confirmation email. Then the model re-plans and sends the same email again.');
    const email = { to: `${customerId}@example.com`, subject: `Order ${orderId} confirmed`, body: 'Thank you for your order.' };
    done(await client.callWrite({ tool: 'send_email', args: { ...email, trace_id: 'plan-1' } }));
    log('   re-planned: same email, arguments in another order, new trace_id');
    done(
      await client.callWrite({ tool: 'send_email', args: { body: email.body, subject: email.subject, to: email.to, trace_id: 'plan-2' } }),
    );
    const delivered = await waitFor(sandbox, sleep, options.deliveryTimeoutMs ?? 30_000, (ledger) =>
      (ledger.emails ?? []).some((e) => e.to === email.to),
    );
    log(delivered ? '   the queued email was delivered' : '   the queued email was not delivered in time');

    log('\n3. Pay. The person approves the payment on the approval page; then the provider commits it but answers after');
    log('   the server stopped waiting (commit-then-timeout): the server answers unknown, its reconciler asks the provider,');
    log('   and the retry gets the payment.');
    const armed = await fetch(sandbox('faults'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ target: 'payments', mode: 'commit-then-timeout', times: 1 }),
    });
    if (!armed.ok) throw new Error(`could not arm the payments fault: HTTP ${armed.status}`);
    const payeeId = `payee-${run}`;
    done(
      await client.callWrite({
        tool: 'request_payment',
        args: { amount_minor: 2490, currency: 'EUR', payee_id: payeeId, memo: `order ${orderId}` },
      }),
    );

    log(`\nClient ledger (session demo-${run}):`);
    log(`   ${'tool'.padEnd(16)} ${'key'.padEnd(12)} ${'state'.padEnd(10)} attempts`);
    for (const entry of client.ledger.entries()) {
      log(`   ${entry.tool.padEnd(16)} ${keyHint(entry.key).padEnd(12)} ${entry.state.padEnd(10)} ${entry.attempts}`);
    }

    const ledger = await readSandbox(sandbox);
    const checks: IntentCheck[] = [
      { intent: 'the order', section: 'orders', effects: (ledger.orders ?? []).filter((o) => o.customer_id === customerId).length },
      { intent: 'the confirmation email', section: 'emails', effects: (ledger.emails ?? []).filter((e) => e.to === email.to).length },
      { intent: 'the payment', section: 'payments', effects: (ledger.payments ?? []).filter((p) => p.payee_id === payeeId).length },
    ];
    log('\nSandbox ledger, this run:');
    for (const check of checks) {
      const verdict = check.effects === 1 ? 'one effect' : check.effects === 0 ? 'MISSING' : 'DOUBLED';
      log(`   ${check.section.padEnd(9)} ${String(check.effects).padStart(2)}  ${check.intent}: ${verdict}`);
    }
    const ok = checks.every((c) => c.effects === 1);
    log(ok ? '\nOne effect per intent.' : '\nNot one effect per intent: see above.');
    return { checks, ok };
  } finally {
    await client.close();
  }
}

async function readSandbox(sandbox: (path: string) => URL): Promise<SandboxLedger> {
  const response = await fetch(sandbox('ledger'));
  if (!response.ok) throw new Error(`GET /sandbox/ledger answered HTTP ${response.status}`);
  return (await response.json()) as SandboxLedger;
}

/** Polls the sandbox ledger until `ready` holds or the time is up (bounded: at most timeout / 250 ms reads). */
async function waitFor(
  sandbox: (path: string) => URL,
  sleep: (ms: number) => Promise<void>,
  timeoutMs: number,
  ready: (ledger: SandboxLedger) => boolean,
): Promise<boolean> {
  for (let waited = 0; waited <= timeoutMs; waited += 250) {
    if (ready(await readSandbox(sandbox))) return true;
    await sleep(250);
  }
  return false;
}
