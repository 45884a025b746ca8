import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { approvalKey } from '../../lambdas/confirmation/core/approval';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../lambdas/core/clock';
import type { IdempotencyRecord } from '../../lambdas/core/state-machine';
import { isWriteTool, type WriteToolDefinition } from '../../lambdas/mcp/tool-types';
import { logger } from '../../lambdas/observability/logger';
import { ExitCode, runOps } from '../../lambdas/ops/cli';
import { stateOf, writeLocalState } from '../../lambdas/ops/local-state';
import { resolveTarget } from '../../lambdas/ops/target';
import { ReviewDesk } from '../../lambdas/ops/review';
import type { AttentionEntry, RecordView } from '../../lambdas/ops/review-types';
import { OutboxDefaults } from '../../lambdas/core/outbox-budget';
import { callWrite, connectClient, connectModernClient } from '../support/mcp';
import { PageVisitor } from '../support/approval';
import { FixtureTool, fixturePaymentArgs, startFixtureStack, type FixtureFaultMode, type FixtureStack } from '../support/fixture-tools';
import { eventually, issueOperationId, operationStatus, peekQueue, settledDelivery } from '../support/side-effects';
import { childBundle } from '../support/child-bundle';

const TENANT = 'tenant-ops';
const PAY = FixtureTool.payment;
const ORDER = FixtureTool.order;
const NOTIFY = FixtureTool.notify;

/**
 * `idempotent-mcp ops` (bin/idempotent-mcp.ts; `npm run ops` here) built into one file, as the package ships its bin
 * (dist/bin/idempotent-mcp.js is esbuild's too), and beside it the tools module `--tools` takes: the fixture tools
 * over the stack's downstream (test/support/fixture-tools-module.ts).
 */
async function builtOps(): Promise<{ bin: string; tools: string }> {
  const built = await childBundle('ops-cli', { ops: 'bin/idempotent-mcp.ts', 'fixture-tools': 'test/support/fixture-tools-module.ts' });
  return { bin: built.ops, tools: built['fixture-tools'] };
}

interface OpsRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('the review workflow (npm run ops) on a running local stack', () => {
  let stack: FixtureStack;
  let client: Client;
  /**
   * The stack's clock (its engine, workers, approval page) and the in-process desk's: the system's, moved ahead by
   * `decidable` when an operation's in-flight window must pass. The window is the reconciler's subject
   * (test/integration/reconciler.test.ts), not the desk's: here it is time passing, not waited for.
   */
  let ahead = 0;
  const clock: Clock = () => Date.now() + ahead;
  /** Stands in for the repo's working directory: `.local/stack.json` is what `npm start` writes. */
  let workDir: string;
  /** Built while the first tests run: only the CLI's child processes wait for it. */
  let opsCli: Promise<{ bin: string; tools: string }>;

  /**
   * The CLI as a real child process, from a directory holding a running stack's state: no flags name the stack. Only
   * where the process is the subject (its stdout holds nothing but the answer, its exit code and stderr line, stdin,
   * its logs and metrics): each one is a cold start of the built CLI.
   */
  async function ops(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<OpsRun> {
    const cli = await opsCli;
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [cli.bin, 'ops', '--tools', cli.tools, ...args], {
        cwd: workDir,
        env: { ...process.env, FIXTURE_DOWNSTREAM_URL: stack.downstream.url, ...env },
        stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
      child.stdin?.end(stdin);
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (chunk) => (stdout += chunk));
      child.stderr!.on('data', (chunk) => (stderr += chunk));
      child.once('error', reject);
      child.once('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  /** The same command in this process (the CLI's own code path, from the same directory): for the rest. */
  async function opsInProcess(args: string[]): Promise<OpsRun> {
    let stdout = '';
    let stderr = '';
    const code = await runOps(
      args,
      { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) },
      {
        logger,
        tools: stack.tools,
        target: (options) => resolveTarget({ ...options, localDir: join(workDir, '.local') }),
        clock,
      },
    );
    return { code, stdout, stderr };
  }

  const identity = (tool: string, key: string) => ({ tenant: TENANT, tool, idempotencyKey: key });
  const record = (key: string) => stack.services.store.get(identity(PAY, key));
  /** The payments the provider (the fixture downstream) holds under the key: the count that matters. */
  const paymentsFor = async (key: string) => stack.downstream.bookings(key);
  const paymentArgs = (operationId: string, payee: string) => fixturePaymentArgs(operationId, { payee_id: payee });

  /** Time passes on the stack's clock until no request of the operations can still land (their in-flight windows) and their next checks are due. */
  async function decidable(...operationIds: string[]) {
    const records = await Promise.all(operationIds.map(record));
    const due = Math.max(...records.map((r) => Math.max(r!.nextCheckAt ?? 0, r!.inFlightUntil ?? 0)));
    ahead = Math.max(ahead, due - Date.now());
  }

  /** A payment whose outcome was lost, then parked after RECONCILE_MAX_ATTEMPTS checks that could not reach the provider. */
  async function parkedPayment(payee: string, lost: Extract<FixtureFaultMode, 'commit-then-timeout' | 'fail-before-commit'>) {
    const operationId = await issueOperationId(client, PAY);
    stack.downstream.arm({ mode: lost });
    expect(await callWrite(client, PAY, paymentArgs(operationId, payee))).toMatchObject({ outcome: 'unknown' });
    // Checks inside the in-flight window are not attempts: the two that park it come after it.
    await decidable(operationId);
    stack.downstream.arm({ mode: 'unavailable', times: 2 });
    // RECONCILE_MAX_ATTEMPTS=2: the second check that cannot reach the provider parks the record.
    for (let run = 0; run < 2; run++) {
      // Its next check is due.
      await decidable(operationId);
      await stack.workers.reconciler.runOnce();
    }
    stack.downstream.clear();
    return operationId;
  }

  beforeAll(async () => {
    opsCli = builtOps();
    // A failed build fails the tests that run the CLI, not the others.
    opsCli.catch(() => {});
    stack = await startFixtureStack({
      env: { DOWNSTREAM_TIMEOUT_MS: '2000', RECONCILE_MAX_ATTEMPTS: '2', OUTBOX_DELIVERY_BUDGET_SECONDS: '1' },
      services: { clock },
      workers: { reconcilerTimer: false, consumer: { retryBaseMs: 0 }, reconciler: { backoffBaseMs: 1 } },
    });
    client = await connectClient(stack, TENANT);
    workDir = await mkdtemp(join(tmpdir(), 'ops-cli-'));
    await writeLocalState(join(workDir, '.local'), stateOf(stack));
  });
  afterAll(async () => {
    await opsCli?.catch(() => {});
    await client?.close();
    await stack?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it("parks an unreachable payment as NEEDS_REVIEW; settle --found makes the next call replay the provider's payment", async () => {
    const operationId = await parkedPayment('payee-found', 'commit-then-timeout');
    const parked = (await record(operationId))!;
    expect(parked).toMatchObject({ status: 'NEEDS_REVIEW', reconcileAttempts: 2, error: { code: 'REVIEW_REQUIRED' } });

    // list --json and show --json: valid JSON naming the parked record, and nothing else on stdout.
    const [listed, shown, onlyUnknown, human] = await Promise.all([
      ops(['list', '--json']),
      ops(['show', TENANT, PAY, operationId, '--json']),
      opsInProcess(['list', '--json', '--status', 'unknown', '--tool', PAY]),
      opsInProcess(['list', '--tenant', TENANT]),
    ]);
    expect(listed.code).toBe(0);
    const entries = JSON.parse(listed.stdout) as AttentionEntry[];
    expect(entries).toContainEqual(
      expect.objectContaining({
        kind: 'record',
        status: 'needs_review',
        tenant: TENANT,
        tool: PAY,
        idempotency_key: operationId,
        attempts: 2,
      }),
    );
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ status: 'NEEDS_REVIEW', attempts: 2, idempotency_key: operationId, review: [] });
    expect((JSON.parse(onlyUnknown.stdout) as AttentionEntry[]).some((e) => e.kind === 'record' && e.idempotency_key === operationId)).toBe(
      false,
    );
    expect(human.stdout).toMatch(new RegExp(`needs_review .*${operationId}`));

    // The provider has the payment (the call committed there); the person looks it up and settles with it, as the
    // tool returns a payment.
    const [booking] = await paymentsFor(operationId);
    expect(booking).toBeDefined();
    const payment = { payment_id: booking!.booking_id, amount_minor: 1250, currency: 'EUR', payee_id: 'payee-found' };

    // Bad input: one line on stderr, exit code 2, nothing written (one as a child process, the rest in process).
    const malformed = await ops(['settle', TENANT, PAY, operationId, '--found', '--result', '{"payment_id": ', '--reason', 'seen']);
    expect(malformed).toMatchObject({ code: 2, stdout: '', stderr: expect.stringMatching(/^error: --result is not valid JSON[^\n]*\n$/) });
    const refused = [
      ['settle', TENANT, PAY, operationId, '--found', '--result', '{"payment_id": ', '--reason', 'seen in the provider console'],
      ['settle', TENANT, PAY, operationId, '--found', '--result', '{"payment_id":"pay_1"}', '--reason', 'seen in the provider console'],
      ['settle', TENANT, PAY, operationId, '--found', '--result', JSON.stringify(payment)],
      ['settle', TENANT, PAY, operationId, '--found', '--absent', '--reason', 'both'],
      ['settle', TENANT, PAY, 'no-such-key-123', '--absent', '--reason', 'typo'],
      ['recheck', TENANT, PAY, operationId, '--reason', ' '],
      // A reason longer than a review log entry may be: refused before anything is read or written.
      ['settle', TENANT, PAY, operationId, '--found', '--result', JSON.stringify(payment), '--reason', 'x'.repeat(1001)],
      ['recheck', TENANT, PAY, operationId, '--reason', 'y'.repeat(125_000)],
      ['settle', TENANT, PAY, operationId, '--found', '--result', '{}', '--result-file', '-', '--reason', 'twice'],
      ['settle', TENANT, PAY, operationId, '--found', '--result-file', join(workDir, 'no-such-file.json'), '--reason', 'seen'],
      // Tenant ids the endpoint never accepts name no record.
      ['show', 'undefined', PAY, operationId],
      ['settle', '__proto__', PAY, operationId, '--absent', '--reason', 'typo'],
      ['list', '--tenant', 'null'],
      ['list', '--status', 'lost'],
      ['frobnicate'],
    ];
    for (const args of refused) {
      const run = await opsInProcess(args);
      expect(run.code, args.join(' ')).toBe(ExitCode.badInput);
      expect(run.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(run.stderr).toMatch(/^error: /);
      expect(run.stdout).toBe('');
    }
    expect(await record(operationId)).toEqual(parked);

    // Logged and counted (on stderr; stdout stays the JSON answer). The result comes on stdin (--result-file -), as
    // one too long for a command line would.
    const settled = await ops(
      ['settle', TENANT, PAY, operationId, '--found', '--result-file', '-', '--reason', 'payment seen in the provider console', '--json'],
      { POWERTOOLS_LOG_LEVEL: 'INFO', POWERTOOLS_METRICS_DISABLED: 'false' },
      JSON.stringify(payment),
    );
    expect(settled.code, settled.stderr).toBe(0);
    expect(JSON.parse(settled.stdout)).toMatchObject({
      applied: true,
      before: { status: 'NEEDS_REVIEW' },
      after: { status: 'SUCCEEDED', result: payment },
    });
    expect(settled.stderr).toContain('review decision applied');
    expect(settled.stderr).toMatch(/"ReviewDecisions"/);
    expect(settled.stderr).not.toContain(operationId);

    // The next call with the key replays the provider's payment; nothing is paid again.
    expect(await callWrite(client, PAY, paymentArgs(operationId, 'payee-found'))).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
      result: payment,
    });
    expect(await paymentsFor(operationId)).toHaveLength(1);

    // The review log says who, when, what and why; a second decision finds the record settled.
    const view = JSON.parse((await opsInProcess(['show', TENANT, PAY, operationId, '--json'])).stdout) as RecordView;
    expect(view.review).toEqual([
      {
        by: userInfo().username,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        action: 'operator_settled_found',
        reason: 'payment seen in the provider console',
        from: 'NEEDS_REVIEW',
        to: 'SUCCEEDED',
      },
    ]);
    const again = await opsInProcess(['settle', TENANT, PAY, operationId, '--absent', '--reason', 'changed my mind']);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is SUCCEEDED/);
    expect(
      JSON.parse((await opsInProcess(['list', '--json'])).stdout).some(
        (e: AttentionEntry) => e.kind === 'record' && e.idempotency_key === operationId,
      ),
    ).toBe(false);
  }, 180_000);

  it('settle --absent releases the key of a payment that never happened: the retry pays exactly once', async () => {
    const operationId = await parkedPayment('payee-absent', 'fail-before-commit');
    let blindErr = '';
    expect(await record(operationId)).toMatchObject({ status: 'NEEDS_REVIEW' });
    expect(await paymentsFor(operationId)).toHaveLength(0);

    // Without the endpoint's tools module, what an absence means for the tool is not known: refused, nothing written.
    const blind = await runOps(
      ['settle', TENANT, PAY, operationId, '--absent', '--reason', 'no such payment'],
      { out: () => {}, err: (t) => (blindErr += t) },
      {
        logger,
        target: (options) => resolveTarget({ ...options, localDir: join(workDir, '.local') }),
      },
    );
    expect(blind).toBe(ExitCode.badInput);
    expect(blindErr).toMatch(/--tools <module>/);
    expect(await record(operationId)).toMatchObject({ status: 'NEEDS_REVIEW' });

    const settled = await opsInProcess(['settle', TENANT, PAY, operationId, '--absent', '--reason', 'no such payment at the provider']);
    expect(settled.code, settled.stderr).toBe(0);
    expect(settled.stdout).toMatch(/NEEDS_REVIEW -> ABSENT/);
    expect(await record(operationId)).toBeUndefined();
    // The decision outlives the record it released.
    const view = JSON.parse((await opsInProcess(['show', TENANT, PAY, operationId, '--json'])).stdout) as RecordView;
    expect(view).toMatchObject({ status: 'ABSENT', review: [{ action: 'operator_settled_absent', from: 'NEEDS_REVIEW', to: 'ABSENT' }] });

    const args = paymentArgs(operationId, 'payee-absent');
    const retry = await callWrite<{ payment_id: string }>(client, PAY, args);
    expect(retry).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await callWrite(client, PAY, args)).toMatchObject({ outcome: 'succeeded', replayed: true, result: retry.result });
    expect(await paymentsFor(operationId)).toHaveLength(1);
  }, 120_000);

  it("show prints a payment's approval: bound to what, until when, and who of which tenant approved or declined it, when", async () => {
    // A 2026-07-28 client with URL elicitation: the person decides on the approval page (signed in at the dev
    // issuer); the client then retries the call with its requestState, as the SDK does.
    const decideOnPage = (name: string, decision: 'approve' | 'decline') =>
      connectModernClient(stack, TENANT, {
        capabilities: { elicitation: { url: {} } },
        onElicit: async (params) => {
          const link = String(params.url);
          const person = new PageVisitor();
          const decided = await person.decide(link, decision, await person.signIn(link, TENANT, name));
          expect(decided.status).toBe(200);
          return { action: 'accept' };
        },
      });
    const approving = await decideOnPage('alice', 'approve');
    const declining = await decideOnPage('bob', 'decline');
    try {
      const approvedKey = await issueOperationId(approving, PAY);
      const before = clock();
      expect(await callWrite(approving, PAY, paymentArgs(approvedKey, 'payee-approved'))).toMatchObject({ outcome: 'succeeded' });
      const declinedKey = await issueOperationId(declining, PAY);
      expect(await callWrite(declining, PAY, paymentArgs(declinedKey, 'payee-declined'))).toMatchObject({
        outcome: 'rejected',
        error: { code: 'CONFIRMATION_DECLINED' },
      });
      const after = clock();

      const approvedRun = await opsInProcess(['show', TENANT, PAY, approvedKey, '--json']);
      expect(approvedRun.code, approvedRun.stderr).toBe(0);
      const approved = JSON.parse(approvedRun.stdout) as RecordView;
      // Approved by a person: never reported as run without approval.
      expect(approved.ran_without).toBeUndefined();
      expect(approved).toMatchObject({
        status: 'SUCCEEDED',
        approval: {
          status: 'approved',
          mode: 'url',
          tool: PAY,
          // Bound to the arguments that were paid: the record's own fingerprint.
          fingerprint: approved.fingerprint,
          summary: expect.stringContaining('Pay 12.50 EUR to payee-approved'),
          decided_by: `alice@${TENANT}`,
          log: [
            { event: 'requested', at: expect.any(String) },
            { event: 'approved', by: `alice@${TENANT}`, tenant: TENANT, at: approved.approval!.decided_at },
            // The one run the yes authorized, named in the log as in `used_by`.
            { event: 'used', by: approved.approval!.used_by, at: approved.approval!.used_at },
          ],
          used_by: expect.any(String),
        },
      });
      const decidedAt = Date.parse(approved.approval!.decided_at!);
      expect(decidedAt).toBeGreaterThanOrEqual(before);
      expect(decidedAt).toBeLessThanOrEqual(after);
      expect(Date.parse(approved.approval!.expires_at)).toBeGreaterThan(decidedAt);
      expect(approved.approval!.log[0]!).not.toHaveProperty('by');

      // A declined payment leaves the key free, with no idempotency record: show still names who declined it.
      const declined = JSON.parse((await opsInProcess(['show', TENANT, PAY, declinedKey, '--json'])).stdout) as RecordView;
      expect(declined).toMatchObject({
        status: 'ABSENT',
        review: [],
        approval: {
          status: 'declined',
          decided_by: `bob@${TENANT}`,
          log: [{ event: 'requested' }, { event: 'declined', by: `bob@${TENANT}`, tenant: TENANT }],
        },
      });
      expect(await paymentsFor(declinedKey)).toEqual([]);

      // The text output says the same.
      const text = (await opsInProcess(['show', TENANT, PAY, approvedKey])).stdout;
      expect(text).toContain(`  approval      approved by alice@${TENANT}, signed in on the approval page`);
      expect(text).toContain(`    bound to    ${PAY}, fingerprint ${approved.fingerprint}`);
      expect(text).toContain(`    expires     ${approved.approval!.expires_at}`);
      expect(text).toContain(
        `      ${approved.approval!.decided_at}  approved  by alice@${TENANT} (tenant ${TENANT}), signed in on the approval page`,
      );
      expect((await opsInProcess(['show', TENANT, PAY, declinedKey])).stdout).toMatch(
        new RegExp(`status +ABSENT[^]*approval +declined[^]*  declined  by bob@${TENANT} \\(tenant ${TENANT}\\)`),
      );

      // A new round after the decline, approved by another person: show prints every round, the decline kept.
      expect(await callWrite(approving, PAY, paymentArgs(declinedKey, 'payee-declined'))).toMatchObject({ outcome: 'succeeded' });
      const rounds = JSON.parse((await opsInProcess(['show', TENANT, PAY, declinedKey, '--json'])).stdout) as RecordView;
      expect(rounds.approval).toMatchObject({ status: 'approved', round: 2, decided_by: `alice@${TENANT}`, decided_via: 'url' });
      expect(rounds.approval!.log.map((e) => `${e.round} ${e.event} ${e.by ?? ''}`.trim())).toEqual([
        '1 requested',
        `1 declined bob@${TENANT}`,
        '2 requested',
        `2 approved alice@${TENANT}`,
        `2 used ${rounds.approval!.used_by}`,
      ]);
      const roundsText = (await opsInProcess(['show', TENANT, PAY, declinedKey])).stdout;
      expect(roundsText).toMatch(
        new RegExp(
          `round 1 +asked on the approval page, fingerprint ${rounds.fingerprint}: Pay 12\\.50 EUR to payee-declined \\(memo: "rent"\\)\n.*requested\n.*declined  by bob@${TENANT} \\(tenant ${TENANT}\\), signed in on the approval page\n` +
            `    round 2 +asked on the approval page, fingerprint ${rounds.fingerprint}: Pay 12\\.50 EUR to payee-declined \\(memo: "rent"\\)\n.*requested\n.*approved  by alice@${TENANT}`,
        ),
      );

      // A key without an approval shows none.
      const orderKey = `order-${Date.now()}`;
      await callWrite(client, ORDER, { idempotency_key: orderKey, item: 'SKU-1', quantity: 1 });
      const order = await opsInProcess(['show', TENANT, ORDER, orderKey, '--json']);
      expect(JSON.parse(order.stdout)).toMatchObject({ status: 'SUCCEEDED' });
      expect(JSON.parse(order.stdout)).not.toHaveProperty('approval');
      expect((await opsInProcess(['show', TENANT, ORDER, orderKey])).stdout).not.toContain('approval');
    } finally {
      await Promise.all([approving.close(), declining.close()]);
    }
  }, 120_000);

  it("show says who decided and how from the decision's own log entry, never from how the round was asked", async () => {
    // What the form fallback once wrote for a round asked on the page: a page round, decided by the MCP client's answer.
    const key = `op-legacy-${Date.now()}`;
    const at = clock();
    await stack.services.doc.send(
      new PutCommand({
        TableName: stack.config.tableName,
        Item: {
          ...approvalKey({ tenant: TENANT, tool: PAY, idempotencyKey: key }),
          tenant: TENANT,
          tool: PAY,
          idempotencyKey: key,
          fingerprint: 'f'.repeat(64),
          id: `x.${'n'.repeat(22)}`,
          nonce: 'n'.repeat(22),
          mode: 'url',
          summary: 'Pay 602.00 EUR to payee-7',
          status: 'approved',
          createdAt: at,
          expiresAt: at + 900_000,
          decidedAt: at + 1000,
          decidedBy: 'mcp-client',
          log: [
            { at, event: 'requested' },
            { at: at + 1000, event: 'approved', by: 'mcp-client' },
          ],
        },
      }),
    );
    const text = (await opsInProcess(['show', TENANT, PAY, key])).stdout;
    expect(text).toContain("  approval      approved by mcp-client, the MCP client's answer in a form, not a signed-in person's");
    expect(text).not.toContain('the person, on the approval page');
    expect(JSON.parse((await opsInProcess(['show', TENANT, PAY, key, '--json'])).stdout)).toMatchObject({
      approval: {
        decided_by: 'mcp-client',
        decided_via: 'form',
        log: [{ event: 'requested' }, { event: 'approved', by: 'mcp-client', via: 'form' }],
      },
    });
  });

  it("show says so when a payment ran without anyone's approval (the opt-out for 2025-era clients), and not when one approved it", async () => {
    // This stack opts fixture_payment out (CONFIRMATION_OPT_OUT_TOOLS): the 2025-era client pays on its own word.
    const key = await issueOperationId(client, PAY);
    expect(await callWrite(client, PAY, paymentArgs(key, 'payee-unapproved'))).toMatchObject({ outcome: 'succeeded' });
    const text = (await opsInProcess(['show', TENANT, PAY, key])).stdout;
    expect(text).toContain(
      "  approval      NONE: this call ran without anyone's approval (the tool is opted out for 2025-era clients: CONFIRMATION_OPT_OUT_TOOLS)",
    );
    expect(JSON.parse((await opsInProcess(['show', TENANT, PAY, key, '--json'])).stdout)).toMatchObject({
      status: 'SUCCEEDED',
      ran_without: 'approval',
    });
    // A tool that needs no approval never says so.
    const order = `order-${Date.now()}`;
    await callWrite(client, ORDER, { idempotency_key: order, item: 'SKU-1', quantity: 1 });
    expect((await opsInProcess(['show', TENANT, ORDER, order])).stdout).not.toMatch(/without anyone/);
  });

  it('recheck sends a parked record back to the reconciler with fresh attempts', async () => {
    const operationId = await parkedPayment('payee-recheck', 'commit-then-timeout');
    const run = await opsInProcess(['recheck', TENANT, PAY, operationId, '--reason', 'provider is back up']);
    expect(run.code, run.stderr).toBe(0);
    const rechecked = (await record(operationId))!;
    expect(rechecked.status).toBe('UNKNOWN');
    expect(rechecked.reconcileAttempts).toBeUndefined();
    expect(JSON.parse((await opsInProcess(['list', '--json', '--status', 'unknown'])).stdout)).toContainEqual(
      expect.objectContaining({ status: 'unknown', idempotency_key: operationId, attempts: 0 }),
    );

    expect((await stack.workers.reconciler.runOnce()).found).toBeGreaterThanOrEqual(1);
    const [booking] = await paymentsFor(operationId);
    expect(await record(operationId)).toMatchObject({ status: 'SUCCEEDED', result: { payment_id: booking!.booking_id } });
  }, 120_000);

  it('show says when an UNKNOWN payment becomes decidable; settle --absent is refused before then, nothing written', async () => {
    const operationId = await issueOperationId(client, PAY);
    stack.downstream.arm({ mode: 'fail-before-commit' });
    expect(await callWrite(client, PAY, paymentArgs(operationId, 'payee-early'))).toMatchObject({ outcome: 'unknown' });
    const unknown = (await record(operationId))!;
    const shown = JSON.parse((await opsInProcess(['show', TENANT, PAY, operationId, '--json'])).stdout) as RecordView;
    expect(shown.decidable_at).toBe(new Date(unknown.inFlightUntil!).toISOString());
    expect((await opsInProcess(['show', TENANT, PAY, operationId])).stdout).toMatch(
      /decidable at\s+\S+ \(a request may still land until then\)/,
    );
    const early = await opsInProcess(['settle', TENANT, PAY, operationId, '--absent', '--reason', 'the provider shows nothing']);
    expect(early.code).toBe(2);
    expect(early.stderr).toMatch(/may still land until/);
    expect(await record(operationId)).toMatchObject({ status: 'UNKNOWN', updatedAt: unknown.updatedAt });
    expect(await stack.services.store.reviewLog(identity(PAY, operationId))).toEqual({ entries: [], version: 0 });
  });

  it('list --status stale names a PROCESSING record whose lease passed, not a live one', async () => {
    const now = clock();
    const claim = (key: string, leaseExpiresAt: number) =>
      stack.services.store.claim(
        {
          ...identity(PAY, key),
          fingerprint: 'f'.repeat(64),
          status: 'PROCESSING',
          ownerToken: `owner-${key}`,
          createdAt: now - 60_000,
          updatedAt: now - 60_000,
          leaseExpiresAt,
          retainUntil: now + 86_400_000,
          expiresAt: Math.floor(now / 1000) + 86_400,
        },
        now,
      );
    const dead = `stale-${now}`;
    const live = `live-${now}`;
    await claim(dead, now - 30_000);
    await claim(live, now + 600_000);
    const stale = JSON.parse((await opsInProcess(['list', '--json', '--status', 'stale', '--tenant', TENANT])).stdout) as AttentionEntry[];
    expect(stale).toContainEqual(expect.objectContaining({ kind: 'record', status: 'stale', idempotency_key: dead }));
    expect(stale.some((e) => e.kind === 'record' && e.idempotency_key === live)).toBe(false);
  });

  it('an operator and the reconciler racing on one record: exactly one transition lands', async () => {
    const tools = new Map(stack.tools.filter(isWriteTool).map((t): [string, WriteToolDefinition] => [t.name, t]));
    const desk = new ReviewDesk({
      store: stack.services.store,
      outbox: stack.services.outbox,
      tools,
      who: async () => 'race-test',
      logger,
      clock,
    });
    // UNKNOWN payments that did go through: the reconciler will find each one (SUCCEEDED), the operator releases it (ABSENT).
    const keys = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        const operationId = await issueOperationId(client, PAY);
        return { operationId, args: paymentArgs(operationId, `payee-race-${i}`) };
      }),
    );
    stack.downstream.arm({ mode: 'commit-then-timeout', times: keys.length });
    await Promise.all(keys.map(async ({ args }) => expect(await callWrite(client, PAY, args)).toMatchObject({ outcome: 'unknown' })));

    // First the deterministic interleaving: read, the reconciler moves, then the write: nothing is written. (An
    // absence is only settled once no request of the payment can still land.)
    const [first, ...rest] = keys;
    await decidable(...keys.map((k) => k.operationId));
    const stale = await desk.prepare(identity(PAY, first!.operationId), { kind: 'absent' }, 'race: stale read');
    const report = await stack.workers.reconciler.runOnce();
    expect(report.found).toBe(keys.length);
    const lost = await desk.apply(stale);
    expect(lost).toMatchObject({ applied: false, read: { status: 'UNKNOWN' }, now: { status: 'SUCCEEDED' } });
    expect(await stack.services.store.reviewLog(identity(PAY, first!.operationId))).toEqual({ entries: [], version: 0 });

    // Then truly concurrent: each record read by both, both write at once.
    const fresh = await Promise.all(
      rest.map(async () => {
        const operationId = await issueOperationId(client, PAY);
        return { operationId, args: paymentArgs(operationId, 'payee-race-concurrent') };
      }),
    );
    stack.downstream.arm({ mode: 'commit-then-timeout', times: fresh.length });
    await Promise.all(fresh.map(async ({ args }) => expect(await callWrite(client, PAY, args)).toMatchObject({ outcome: 'unknown' })));
    await decidable(...fresh.map(({ operationId }) => operationId));
    const prepared = await Promise.all(
      fresh.map(({ operationId }) => desk.prepare(identity(PAY, operationId), { kind: 'absent' }, 'race')),
    );
    const [reconciled, ...decisions] = await Promise.all([stack.workers.reconciler.runOnce(), ...prepared.map((p) => desk.apply(p))]);
    for (const [i, { operationId }] of fresh.entries()) {
      const decision = decisions[i]!;
      const now: IdempotencyRecord | undefined = await record(operationId);
      const log = await stack.services.store.reviewLog(identity(PAY, operationId));
      if (decision.applied) {
        expect(now, 'the operator released it; the reconciler wrote nothing').toBeUndefined();
        expect(log.entries).toHaveLength(1);
      } else {
        expect(now, 'the reconciler settled it; the operator wrote nothing').toMatchObject({ status: 'SUCCEEDED' });
        expect(log.entries).toHaveLength(0);
      }
    }
    const operatorWins = decisions.filter((d) => d.applied).length;
    expect(reconciled.found + operatorWins).toBe(fresh.length);
  }, 120_000);

  it('list shows an outbox event still pending past its expected delivery, long before the sweep sends it again', async () => {
    // The relay is not running: as after a crash between the commit and the send.
    const halted = await startFixtureStack({ workers: { relayPoller: false } });
    try {
      const agent = await connectClient(halted, TENANT);
      const key = `email-${Date.now()}`;
      const { result } = await callWrite<{ event_id: string }>(agent, NOTIFY, {
        idempotency_key: key,
        to: 'ops@example.com',
        text: 'Late: queued',
      });
      await agent.close();
      const pendingAt = async (at: number) => {
        const desk = new ReviewDesk({
          store: halted.services.store,
          outbox: halted.services.outbox,
          tools: new Map(),
          who: async () => 'test',
          logger,
          clock: () => at,
        });
        return (await desk.list({ status: 'pending' })).entries.flatMap((e) => (e.kind === 'outbox_event' ? [e.event_id] : []));
      };
      // Just committed: expected to be delivered in a moment, not worth a person's attention.
      expect(await pendingAt(Date.now())).not.toContain(result!.event_id);
      // Past its expected delivery, and before the sweep's first look would send it again: late, and shown.
      expect(OutboxDefaults.expectedDeliveryMs).toBeLessThan(OutboxDefaults.redeliverAfterMs);
      expect(await pendingAt(Date.now() + OutboxDefaults.expectedDeliveryMs + 1000)).toContain(result!.event_id);
    } finally {
      await halted.stop();
    }
  }, 120_000);

  it('redrive moves a dead-letter event back to the outbox queue: delivered exactly once', async () => {
    stack.downstream.arm({ mode: 'unavailable', times: 50 });
    const key = `ticket-${Date.now()}`;
    const { result } = await callWrite<{ event_id: string }>(client, NOTIFY, {
      idempotency_key: key,
      to: 'oncall@example.com',
      text: 'Disk full',
    });
    const eventId = result!.event_id;
    expect(await settledDelivery(client, NOTIFY, key)).toMatchObject({ status: 'failed' });
    await eventually(
      async () => ((await peekQueue(stack, stack.queue.deadLetterQueueUrl)).includes(eventId) ? true : undefined),
      'the message in the dead-letter queue',
    );

    const failed = JSON.parse((await opsInProcess(['list', '--json', '--status', 'failed'])).stdout) as AttentionEntry[];
    expect(failed).toContainEqual(expect.objectContaining({ kind: 'outbox_event', status: 'failed', event_id: eventId, tool: NOTIFY }));

    stack.downstream.clear();
    const redriven = await opsInProcess(['redrive', '--json']);
    expect(redriven.code, redriven.stderr).toBe(0);
    expect(JSON.parse(redriven.stdout)).toMatchObject({ moved: [{ event_id: eventId, tenant: TENANT, tool: NOTIFY }], skipped: 0 });
    await eventually(
      async () => ((await operationStatus(client, NOTIFY, key)).delivery?.status === 'delivered' ? true : undefined),
      'the redriven delivery',
    );
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
    expect(JSON.parse((await opsInProcess(['redrive', '--json'])).stdout)).toMatchObject({ moved: [] });

    // A second copy of the same message (a redrive run twice) is a duplicate to the consumer: still one notification.
    const body = JSON.stringify({ ...(await stack.services.outbox.getEvent(eventId))!.message });
    await stack.workers.sqs.send(new SendMessageCommand({ QueueUrl: stack.queue.queueUrl, MessageBody: body }));
    await eventually(
      async () => ((await peekQueue(stack, stack.queue.queueUrl)).length === 0 ? true : undefined),
      'the copy to be consumed',
    );
    expect(stack.downstream.bookings(eventId)).toHaveLength(1);
    const listed = JSON.parse((await opsInProcess(['list', '--json'])).stdout) as AttentionEntry[];
    expect(listed.some((e) => e.kind === 'outbox_event' && e.event_id === eventId)).toBe(false);
  }, 120_000);
});
