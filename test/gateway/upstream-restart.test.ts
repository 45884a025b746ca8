import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../lambdas/local/free-port';
import {
  BILLING_SERVER,
  contract,
  jsonLines,
  newKey,
  scratch,
  startBillingServer,
  sdkClient,
  startTestGateway,
  type TestGateway,
} from './support';

/**
 * The upstream restarts while the gateway runs: a billing server of the team's own (MCP SDK 1.x, sessions kept in
 * memory over streamable HTTP; or stdio) is killed in the middle of a charge, after booking it and before answering,
 * and comes back. The charge in flight is settled by its lookup (booked once), and the gateway meets the new server:
 * over HTTP it starts a new session when the server answers 404 to the old one (the spec's client MUST), over stdio it
 * starts the process again. Every charge is booked once, counted in the server's own ledger.
 */
const policy = {
  tools: {
    charge: {
      kind: 'write',
      timeoutMs: 5000,
      inFlightWindowMs: 1000,
      reconcile: { tool: 'find_charge', arguments: { charge_id: '{{charge_id}}' }, found: { textEquals: 'found' } },
    },
    find_charge: { kind: 'read' },
  },
};

const stops: Array<() => unknown> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

/** The billing server over streamable HTTP on `port`, killed after the test; resolves once it listens. */
async function startBilling(port: number, files: { ledger: string; log: string }) {
  const child = await startBillingServer(port, files);
  stops.push(() => child.kill('SIGKILL'));
  return child;
}

async function charge(gateway: TestGateway, charge_id: string, key = newKey()) {
  const client = await sdkClient(gateway);
  try {
    return { key, answer: contract(await client.callTool({ name: 'charge', arguments: { charge_id, amount: 5, idempotency_key: key } })) };
  } finally {
    await client.close();
  }
}

/** Calls again with the same key until the answer is settled (the reconciler's lookup settles an unknown one). */
async function settled(gateway: TestGateway, charge_id: string, key: string) {
  for (let attempt = 0; attempt < 120; attempt++) {
    const { answer } = await charge(gateway, charge_id, key);
    if (answer.outcome !== 'unknown' && answer.outcome !== 'in_progress') return answer;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${charge_id} never settled`);
}

async function bothMeetTheNewServer(gateway: TestGateway, restart: () => Promise<unknown>, ledger: string) {
  expect((await charge(gateway, 'before')).answer).toMatchObject({ outcome: 'succeeded' });

  // Killed mid-call: the charge was booked, its answer never came.
  const crash = await charge(gateway, 'crash-1');
  expect(crash.answer.outcome).toBe('unknown');
  await restart();

  // New writes and reads reach the restarted server.
  expect((await charge(gateway, 'after')).answer).toMatchObject({ outcome: 'succeeded', replayed: false });
  const reader = await sdkClient(gateway);
  const found = (await reader.callTool({ name: 'find_charge', arguments: { charge_id: 'after' } })) as {
    isError?: boolean;
    content: Array<{ text: string }>;
  };
  await reader.close();
  expect(found.isError).toBeFalsy();
  expect(found.content[0]!.text).toBe('found');

  // The charge in flight: settled by its lookup as booked, never sent again.
  expect(await settled(gateway, 'crash-1', crash.key)).toMatchObject({ outcome: 'succeeded', result: { settledByLookup: true } });
  const booked = jsonLines(ledger).map((line) => line.charge_id);
  expect(booked.sort()).toEqual(['after', 'before', 'crash-1']);
}

describe('an upstream that restarts is met again', () => {
  it('streamable HTTP with sessions: a 404 to the old session starts a new one; the charge in flight is booked once', {
    timeout: 120_000,
  }, async () => {
    const { dir, cleanup } = await scratch('sessions');
    stops.push(cleanup);
    const files = { ledger: join(dir, 'ledger.jsonl'), log: join(dir, 'server.jsonl') };
    const port = await freePort();
    await startBilling(port, files);
    const gateway = await startTestGateway({ policy, argv: ['--upstream-url', `http://127.0.0.1:${port}/mcp`] });
    stops.push(() => gateway.stop());
    await bothMeetTheNewServer(gateway, () => startBilling(port, files), files.ledger);
    // The restarted server answered the gateway's old session with 404: the gateway went on with a new one.
    expect(jsonLines(files.log).filter((line) => line.event === 'session-not-found').length).toBeGreaterThan(0);
  });

  it('stdio: the process killed mid-call is started again by the gateway; the charge in flight is booked once', {
    timeout: 120_000,
  }, async () => {
    const { dir, cleanup } = await scratch('stdio-restart');
    stops.push(cleanup);
    const ledger = join(dir, 'ledger.jsonl');
    const gateway = await startTestGateway({ policy, argv: ['--', process.execPath, BILLING_SERVER, `--ledger=${ledger}`] });
    stops.push(() => gateway.stop());
    await bothMeetTheNewServer(gateway, async () => {}, ledger);
  });
});
