import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Client, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { InvoiceBook, invoiceTools } from '../../examples/own-mcp-server/server';
import { PACKAGE_ROOT as PROJECT_ROOT } from '../../lib/package-root';
import { createToolRuntime, startReconciler } from 'idempotent-mcp/mcp';
import { DynamoDbIdempotencyStore } from '../../lambdas/store/dynamodb-idempotency-store';
import { createTestTable } from '../support/dynamodb';

/**
 * A team's own stdio MCP server (test/support/own-stdio-server.ts, built as examples/own-mcp-server is) whose
 * invoicing system files an invoice and then times out: the call answers `unknown`, the reconciler the server
 * started settles it through the tool's own reconcile hook, and the retry gets that invoice. All the while standard
 * output carries JSON-RPC and nothing else: the reconciler's logs and metrics go to standard error.
 */

/** The client side of stdio, keeping every line the server writes on standard output. */
class ChildStdio implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly stdoutLines: string[] = [];
  stderr = '';
  private buffered = '';

  constructor(readonly child: ChildProcess) {}

  async start() {
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.buffered += chunk;
      let end: number;
      while ((end = this.buffered.indexOf('\n')) >= 0) {
        const line = this.buffered.slice(0, end);
        this.buffered = this.buffered.slice(end + 1);
        this.stdoutLines.push(line);
        try {
          this.onmessage?.(JSON.parse(line) as JSONRPCMessage);
        } catch {
          // Kept in stdoutLines: the assertion names it.
        }
      }
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.child.once('exit', () => this.onclose?.());
  }

  async send(message: JSONRPCMessage) {
    this.child.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  async close() {
    this.child.stdin!.end();
    this.child.kill();
  }

  /** Standard output with everything but whole JSON-RPC 2.0 messages, one per line (a partial last line counts too). */
  notJsonRpc(): string[] {
    const isJsonRpc = (line: string) => {
      try {
        return (JSON.parse(line) as { jsonrpc?: unknown }).jsonrpc === '2.0';
      } catch {
        return false;
      }
    };
    return [...this.stdoutLines.filter((line) => !isJsonRpc(line)), ...(this.buffered ? [this.buffered] : [])];
  }

  /** The JSON lines on standard error (the logs and the EMF metrics). */
  stderrJson(): Record<string, unknown>[] {
    return this.stderr.split('\n').flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  }
}

let table: Awaited<ReturnType<typeof createTestTable>>;
let stdio: ChildStdio;
let client: Client;

beforeAll(async () => {
  table = await createTestTable();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DYNAMODB_ENDPOINT: table.endpoint,
    TABLE_NAME: table.tableName,
    RECONCILE_INTERVAL_MS: '300',
  };
  // As in a team's shell: the test run's quieting of Powertools would hide a log or metric written to stdout.
  for (const name of ['POWERTOOLS_LOG_LEVEL', 'POWERTOOLS_METRICS_DISABLED', 'POWERTOOLS_DEV']) delete env[name];
  const child = spawn(
    join(PROJECT_ROOT, 'node_modules/.bin/tsx'),
    ['--tsconfig', join(PROJECT_ROOT, 'tsconfig.json'), join(PROJECT_ROOT, 'test/support/own-stdio-server.ts')],
    {
      cwd: PROJECT_ROOT,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  stdio = new ChildStdio(child);
  client = new Client({ name: 'own-server-test', version: '1' }, { versionNegotiation: { mode: 'legacy' } });
  await client.connect(stdio);
}, 60_000);

afterAll(async () => {
  await client?.close();
  await table?.drop();
});

it('settles a lost outcome through the tool reconcile hook; the retry gets the invoice; stdout carries only JSON-RPC', async () => {
  const args = { idempotency_key: `inv-${randomUUID()}`, customer: 'c-1', amount_minor: 4200 };
  const first = (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as Record<string, unknown>;
  expect(first.outcome, JSON.stringify(first)).toBe('unknown');

  // The reconciler runs every 300 ms in the server: the record becomes SUCCEEDED with the invoice the hook found.
  const store = new DynamoDbIdempotencyStore({ client: table.doc, tableName: table.tableName });
  const id = { tenant: 'acme', tool: 'create_invoice', idempotencyKey: args.idempotency_key };
  await expect.poll(async () => (await store.get(id))?.status, { timeout: 20_000, interval: 200 }).toBe('SUCCEEDED');
  const settled = (await store.get(id))!.result as { invoice_id: string };
  expect(settled.invoice_id).toMatch(/^inv_/);

  const again = (await client.callTool({ name: 'create_invoice', arguments: args })).structuredContent as Record<string, unknown>;
  expect(again).toMatchObject({
    outcome: 'succeeded',
    replayed: true,
    result: { invoice_id: settled.invoice_id, customer: 'c-1', amount_minor: 4200 },
  });

  // The reconciler reported on standard error: its log line, and its metrics as EMF in the namespace it was given.
  await expect
    .poll(() => stdio.stderrJson().some((line) => line.message === 'reconciled: the downstream has the effect'), { timeout: 5_000 })
    .toBe(true);
  const log = stdio.stderrJson().find((line) => line.message === 'reconciled: the downstream has the effect')!;
  expect(log).toMatchObject({ level: 'INFO', service: 'invoices', tool: 'create_invoice', tenant: 'acme', finding: 'found' });
  const emf = stdio.stderrJson().filter((line) => line._aws !== undefined) as {
    _aws: { CloudWatchMetrics: { Namespace: string; Metrics: { Name: string }[] }[] };
    tool?: string;
    service?: string;
  }[];
  const settledMetric = emf.find((line) => line._aws.CloudWatchMetrics[0]!.Metrics.some((m) => m.Name === 'ReconciledSucceeded'));
  expect(settledMetric?._aws.CloudWatchMetrics[0]?.Namespace).toBe('TeamInvoices');
  expect(settledMetric).toMatchObject({ tool: 'create_invoice', service: 'invoices' });

  expect(stdio.stdoutLines.length).toBeGreaterThanOrEqual(3);
  expect(stdio.notJsonRpc()).toEqual([]);
});

it('runOnce: a pass when you ask for one, logging and counting where it is told', async () => {
  // A table of its own: the stdio server's reconciler, which knows nothing of this invoice, must not reach it first.
  const own = await createTestTable();
  const book = new InvoiceBook();
  const { tools, withClients } = invoiceTools(book);
  const store = new DynamoDbIdempotencyStore({ client: own.doc, tableName: own.tableName });
  const runtime = withClients(createToolRuntime({ store, secret: randomUUID() + randomUUID() }));
  const request = {
    tenant: 'beta',
    tool: 'create_invoice',
    idempotencyKey: `inv-${randomUUID()}`,
    args: { customer: 'c-2', amount_minor: 99 },
  };
  const lost = await runtime.engine.run(request, {}, async (ctx) => {
    await book.create(ctx.tenant, ctx.idempotencyKey, { customer: 'c-2', amount_minor: 99 });
    throw new Error('socket hang up');
  });
  expect(lost.outcome).toBe('unknown');

  const lines: string[] = [];
  const logged: string[] = [];
  const logger = {
    debug: () => {},
    info: (message: string) => logged.push(message),
    warn: (message: string) => logged.push(message),
    error: (message: string) => logged.push(message),
  };
  const reconciler = startReconciler({
    tools,
    withClients,
    store,
    logger,
    serviceName: 'billing',
    metrics: { namespace: 'Billing', write: (line) => lines.push(line) },
    intervalMs: 3_600_000,
  });
  // Asked before the scheduled first run starts, it is that first pass: the one that finds the invoice.
  const report = await reconciler.runOnce();
  await reconciler.stop();
  expect(report.found).toBe(1);
  const record = await store.get({ tenant: 'beta', tool: 'create_invoice', idempotencyKey: request.idempotencyKey });
  expect(record).toMatchObject({ status: 'SUCCEEDED', result: await book.findByKey('beta', request.idempotencyKey) });
  expect(logged).toContain('reconciled: the downstream has the effect');
  const emf = lines.map((line) => JSON.parse(line) as { _aws: { CloudWatchMetrics: { Namespace: string }[] }; service: string });
  expect(emf.length).toBeGreaterThan(0);
  expect(emf.every((doc) => doc._aws.CloudWatchMetrics[0]!.Namespace === 'Billing' && doc.service === 'billing')).toBe(true);

  // A store without the queries the reconciler reads is refused in one sentence, before anything runs.
  expect(() => startReconciler({ tools, withClients, store: {} as DynamoDbIdempotencyStore })).toThrow(
    /needs `store`: the store your tool runtime writes to, with its queries/,
  );
  await own.drop();
});
