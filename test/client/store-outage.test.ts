import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { IdempotentMcpClient } from '../../client/idempotent-client';
import { decideAsLocalPerson } from '../../scripts/local-approver';
import { startDynamoDbFaultProxy, type DynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';

// The stack reaches DynamoDB Local only through this proxy: stopping it is a real outage (connections refused).
let dynamoProxy: DynamoDbFaultProxy;
let stack: FixtureStack;
let client: IdempotentMcpClient;

beforeAll(async () => {
  dynamoProxy = await startDynamoDbFaultProxy(inject('dynamodbEndpoint'));
  // fixture_payment: a server-issued operation id, the person's approval, the payment booked at the fixture downstream.
  stack = await startFixtureStack({ env: { DYNAMODB_ENDPOINT: dynamoProxy.endpoint, CONFIRMATION_OPT_OUT_TOOLS: '' } });
  let now = Date.now();
  client = new IdempotentMcpClient({
    url: stack.mcpUrl,
    token: await stack.tokenFor('outage-tenant'),
    random: () => 0.5,
    // The person approves the payment on the approval page (signed in at the local dev issuer).
    onApprovalLink: (link) => decideAsLocalPerson(link.url, { tenant: 'outage-tenant', decision: 'approve' }),
    clock: () => now,
    sleep: async (ms) => {
      now += ms;
    },
  });
});
afterAll(async () => {
  await client?.close();
  await stack?.stop();
  await dynamoProxy?.stop();
});

it('a payment that succeeded stays succeeded in the ledger when a re-plan meets a store outage', async () => {
  const args = { amount_minor: 1250, currency: 'EUR', payee_id: 'payee-outage', memo: 'outage test' };
  const paid = await client.callWrite({ tool: FixtureTool.payment, args });
  expect(paid).toMatchObject({ state: 'succeeded', result: { outcome: 'succeeded', replayed: false } });

  await dynamoProxy.stop();
  const replanned = await client.callWrite({ tool: FixtureTool.payment, args });

  // The server cannot read the key, so it cannot know what ran: unknown, never "failed, nothing was executed".
  expect(replanned).toMatchObject({
    key: paid.key,
    state: 'succeeded',
    result: { outcome: 'unknown', retryable: true, error: { code: 'STORE_UNAVAILABLE' } },
  });
  expect(replanned.result?.retry_after_ms).toBeGreaterThan(0);
  expect(replanned.status).toMatch(/succeeded earlier/);
  expect(client.ledger.entries().find((entry) => entry.key === paid.key)).toMatchObject({ state: 'succeeded' });
  // Paid once: the re-plan sent nothing to the payee's provider.
  expect(stack.downstream.calls(paid.key)).toBe(1);
  expect(stack.downstream.bookings(paid.key)).toHaveLength(1);
});
