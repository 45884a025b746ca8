import { randomUUID } from 'node:crypto';
import { InMemoryIdempotencyStore } from 'idempotent-mcp/engine';
import { createToolRuntime, startReconciler } from 'idempotent-mcp/mcp';
import { afterEach, expect, it } from 'vitest';
import { InvoiceBook, invoiceTools } from '../../examples/own-mcp-server/server';

/**
 * `startReconciler` on any store with the queries (`RecordQueries`), not only DynamoDB's: a team testing its server
 * on the in-memory store gets the same settlement of a lost outcome through the tool's reconcile hook.
 */

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

it('settles an UNKNOWN record on the in-memory store by asking the downstream; the retry replays the invoice', async () => {
  const book = new InvoiceBook();
  const { tools, withClients } = invoiceTools(book);
  const store = new InMemoryIdempotencyStore();
  const runtime = withClients(createToolRuntime({ store, secret: randomUUID() + randomUUID(), logger: quiet }));
  const request = {
    tenant: 'acme',
    tool: 'create_invoice',
    idempotencyKey: `inv-${randomUUID()}`,
    args: { customer: 'c-1', amount_minor: 4200 },
  };
  // The invoice is filed, then the answer is lost: the engine cannot know, the record is UNKNOWN.
  const lost = await runtime.engine.run(request, {}, async (ctx) => {
    await book.create(ctx.tenant, ctx.idempotencyKey, request.args);
    throw new Error('socket hang up');
  });
  expect(lost.outcome).toBe('unknown');

  const reconciler = startReconciler({ tools, withClients, store, logger: quiet, metrics: false });
  stops.push(() => reconciler.stop());
  // runOnce waits for the run started at once, so the record is settled by one of the two.
  await reconciler.runOnce();
  const filed = await book.findByKey('acme', request.idempotencyKey);
  expect(await store.get(request)).toMatchObject({ status: 'SUCCEEDED', result: filed });

  let ranAgain = false;
  const again = await runtime.engine.run(request, {}, async () => {
    ranAgain = true;
    throw new Error('a retry must not file a second invoice');
  });
  expect(again).toMatchObject({ outcome: 'succeeded', replayed: true, result: filed });
  expect(ranAgain).toBe(false);
});

it('refuses a store without the queries in one sentence, before anything runs', () => {
  const { tools, withClients } = invoiceTools(new InvoiceBook());
  expect(() => startReconciler({ tools, withClients, store: {} as InMemoryIdempotencyStore })).toThrow(
    /needs `store`: the store your tool runtime writes to, with its queries \(RecordQueries/,
  );
});

it('refuses a metrics publisher of its own (from JS, or through a cast) in one sentence, instead of ignoring it', () => {
  const { tools, withClients } = invoiceTools(new InvoiceBook());
  const store = new InMemoryIdempotencyStore();
  const counted: string[] = [];
  const publisher = { add: (name: string) => counted.push(name), countForTool: () => {}, flush: () => {} };
  const start = (metrics: unknown) =>
    startReconciler({ tools, withClients, store, logger: quiet, metrics: metrics as { write?: (line: string) => void } });
  expect(() => start(publisher)).toThrow(
    /^`metrics` takes false or \{ namespace, write \} \(not add, countForTool, flush\): a publisher of your own is not taken/,
  );
  expect(() => start({ namespace: 'Billing', serviceName: 'billing' })).toThrow(/\(not serviceName\)/);
  expect(() => start(true)).toThrow(/^`metrics` takes false or \{ namespace, write \}:/);
  // Its one shape is taken as before.
  const reconciler = start({ namespace: 'Billing', write: () => {} });
  stops.push(() => reconciler.stop());
});
