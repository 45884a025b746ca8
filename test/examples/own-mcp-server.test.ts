import { afterAll, beforeAll, inject, it } from 'vitest';
import { startInvoiceServer, type StartedServer } from '../../examples/own-mcp-server/server';
import { checkContract, checkRetryReplays, checkUnknownSettles } from '../../examples/own-mcp-server/test';

/**
 * The example a team copies (its own McpServer, one write tool through registerWriteTool, DynamoDB Local), run on
 * the sources here; test/package/pack.test.ts runs the same check against the packed package.
 */
let server: StartedServer;
beforeAll(async () => {
  server = await startInvoiceServer({ dynamodbEndpoint: inject('dynamodbEndpoint') });
});
afterAll(() => server?.stop());

it.each(['2026-07-28', '2025-11-25'] as const)('a %s client creates one invoice per key: the retry replays it', async (era) => {
  await checkRetryReplays(server, era);
});

it('refuses undeclared and invalid arguments and a caller without a tenant, running nothing', async () => {
  await checkContract(server);
});

it('settles a lost outcome through its reconciler: the retry gets the invoice that was filed', async () => {
  process.env.DYNAMODB_ENDPOINT ??= inject('dynamodbEndpoint');
  await checkUnknownSettles();
}, 60_000);
