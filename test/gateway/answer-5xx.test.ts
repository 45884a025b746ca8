import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../../lambdas/local/free-port';
import {
  contract,
  jsonLines,
  newKey,
  scratch,
  sdkClient,
  startBillingServer,
  startHttpRelay,
  startTestGateway,
  type HttpRelay,
  type TestGateway,
} from './support';

/**
 * An HTTP 5xx to `tools/call` says nothing about whether the tool ran: a proxy in front of the upstream forwards the
 * charge, the billing server (a team's own, which does not deduplicate) books it, and the proxy answers 500 in place
 * of the server's answer. The gateway must count the call as possibly applied (`unknown`, its key held), settle it by
 * the policy's lookup, and answer every retry with the same key from that, never by charging again.
 */
const policy = {
  tools: {
    charge: {
      kind: 'write',
      timeoutMs: 5000,
      inFlightWindowMs: 500,
      reconcile: { tool: 'find_charge', arguments: { charge_id: '{{charge_id}}' }, found: { textEquals: 'found' } },
    },
    find_charge: { kind: 'read' },
  },
};

const LOST = 'lost-behind-500';
let ledger: string;
let relay: HttpRelay;
let gateway: TestGateway;
let client: Client;
const stops: Array<() => unknown> = [];

beforeAll(async () => {
  const { dir, cleanup } = await scratch('answer-5xx');
  stops.push(cleanup);
  ledger = join(dir, 'ledger.jsonl');
  const port = await freePort();
  const server = await startBillingServer(port, { ledger });
  stops.push(() => server.kill('SIGKILL'));
  // The proxy: every request forwarded; the first answer to a charge of LOST replaced by a 500 once the server has sent it.
  let replaced = 0;
  relay = await startHttpRelay(`http://127.0.0.1:${port}/mcp`, {
    replaceAnswer: (body) =>
      body.includes('"tools/call"') && body.includes(LOST) && body.includes('"charge"') && replaced++ === 0
        ? { status: 500, headers: { 'content-type': 'text/plain' }, body: 'Internal Server Error' }
        : undefined,
  });
  stops.push(() => relay.close());
  gateway = await startTestGateway({ policy, argv: ['--upstream-url', relay.url] });
  stops.push(() => gateway.stop());
  client = await sdkClient(gateway);
  stops.push(() => client.close());
});
afterAll(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

const charge = async (key: string) =>
  contract(await client.callTool({ name: 'charge', arguments: { charge_id: LOST, amount: 7, idempotency_key: key } }));
const booked = () => jsonLines(ledger).filter((line) => line.charge_id === LOST);

it('a charge answered 500 after the upstream booked it: unknown, settled by the lookup as succeeded, retries replay it; one charge', {
  timeout: 60_000,
}, async () => {
  const key = newKey();
  const first = await charge(key);
  expect(booked()).toHaveLength(1);
  // Possibly applied: not "failed", not "nothing was sent", and the key is not free for a second send.
  expect(first).toMatchObject({ outcome: 'unknown', error: { code: 'OUTCOME_UNKNOWN' } });
  expect(first.error!.message).not.toMatch(/nothing was (sent|run)/i);

  let answer = first;
  for (let attempt = 0; attempt < 120 && (answer.outcome === 'unknown' || answer.outcome === 'in_progress'); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    answer = await charge(key);
  }
  expect(answer).toMatchObject({ outcome: 'succeeded', replayed: true, result: { settledByLookup: true } });
  expect(relay.calls.filter((call) => call.name === 'find_charge' && call.arguments.charge_id === LOST).length).toBeGreaterThan(0);

  expect(await charge(key)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { settledByLookup: true } });
  expect(booked()).toHaveLength(1);
  expect(relay.calls.filter((call) => call.name === 'charge')).toHaveLength(1);
});
