import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestTable } from '../support/dynamodb';
import { PageVisitor } from '../support/approval';
import { rawToolCall, type RawToolAnswer } from '../support/mcp';
import { startEverything } from './registry-servers';
import { newKey, startHttpRelay, startTestGateway, type HttpRelay, type TestGateway } from './support';

/**
 * Two gateways on one table, each in front of its own upstream (server-everything behind two relays: two URLs, two
 * owners), the same write tool with `confirmation: "approval"` on both. A person's approval is for the call to the
 * gateway that asked: under the same tenant, tool, key and arguments, the other gateway neither uses that yes nor
 * shows or decides that approval on its page; it asks its own.
 */
const policy = {
  tools: { echo: { kind: 'write', timeoutMs: 5000, inFlightWindowMs: 1000, confirmation: 'approval', summary: 'Echo {{message}}' } },
};
const TENANT = 'demo';
const yes = { confirm: { action: 'accept' } };

interface Side {
  relay: HttpRelay;
  gateway: TestGateway;
  token: string;
}
const sides: Side[] = [];
const stops: Array<() => unknown> = [];

beforeAll(async () => {
  const everything = await startEverything();
  stops.push(() => everything.stop());
  const table = await createTestTable();
  stops.push(() => table.drop());
  for (let i = 0; i < 2; i++) {
    const relay = await startHttpRelay(everything.url);
    stops.push(() => relay.close());
    const gateway = await startTestGateway({ policy, argv: ['--upstream-url', relay.url], table });
    stops.push(() => gateway.stop());
    sides.push({ relay, gateway, token: await gateway.tokenFor(TENANT) });
  }
});
afterAll(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

const call = (side: Side, args: Record<string, unknown>, round: { requestState?: string; inputResponses?: unknown } = {}) =>
  rawToolCall(side.gateway.mcpUrl, side.token, 'echo', args, round);
const linkOf = (answer: RawToolAnswer) => answer.inputRequests!.confirm.params.url as string;
const echoes = (side: Side, message: string) => side.relay.calls.filter((c) => c.name === 'echo' && c.arguments.message === message);

it("one gateway's approval is not another's: the same tenant, tool, key and arguments on the other gateway ask its own person", async () => {
  const [a, e] = sides as [Side, Side];
  expect(a.gateway.keyPrefix).not.toBe(e.gateway.keyPrefix);
  const message = `shared ${newKey()}`;
  const args = { message, idempotency_key: newKey() };

  const asked = await call(a, args);
  expect(asked).toMatchObject({ resultType: 'input_required' });
  const link = linkOf(asked);
  expect(link.startsWith(`${a.gateway.url}/approvals/`)).toBe(true);
  // The other gateway's page does not know this approval: nobody decides it there.
  const elsewhere = `${e.gateway.url}${new URL(link).pathname}`;
  const visitor = new PageVisitor();
  const there = await visitor.signIn(elsewhere, TENANT, 'mallory');
  expect(there).not.toContain(message);
  expect((await visitor.decide(elsewhere, 'decline', there)).status).toBe(404);
  const person = new PageVisitor();
  expect((await person.decide(link, 'approve', await person.signIn(link, TENANT, 'alice'))).status).toBe(200);

  // The other gateway: nothing sent on the first gateway's yes; a link to its own page, for an approval of its own.
  const other = await call(e, args);
  expect(other).toMatchObject({ resultType: 'input_required' });
  const otherLink = linkOf(other);
  expect(otherLink.startsWith(`${e.gateway.url}/approvals/`)).toBe(true);
  expect(otherLink.slice(otherLink.lastIndexOf('/'))).not.toBe(link.slice(link.lastIndexOf('/')));
  expect(echoes(e, message)).toHaveLength(0);

  // The first gateway's call runs on its yes, once.
  expect((await call(a, args, { requestState: asked.requestState, inputResponses: yes })).structuredContent).toMatchObject({
    outcome: 'succeeded',
    replayed: false,
  });
  expect(echoes(a, message)).toHaveLength(1);
  expect(echoes(e, message)).toHaveLength(0);
});
