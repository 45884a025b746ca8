import { afterAll, beforeAll, inject, it } from 'vitest';
import { type StandInIssuer, startStandInIssuer } from '../../examples/approval-page/issuer';
import { startPaymentServer, type StartedServer } from '../../examples/approval-page/server';
import { checkApprovedOnce, checkLegacyLinkAndDecline } from '../../examples/approval-page/test';

/**
 * The approval example a team copies (its own McpServer, a `confirmation: 'approval'` tool, the page mounted beside
 * /mcp with its own issuer), run on the sources here; test/package/pack.test.ts runs it against the packed package.
 */
let issuer: StandInIssuer;
let server: StartedServer;
beforeAll(async () => {
  issuer = await startStandInIssuer();
  server = await startPaymentServer({ signIn: issuer.signIn, dynamodbEndpoint: inject('dynamodbEndpoint') });
});
afterAll(async () => {
  await server?.stop();
  await issuer?.stop();
});

it('pays once, after a person of the tenant approved on the page (a 2026-07-28 client); another tenant cannot decide', async () => {
  await checkApprovedOnce(server, issuer);
});

it('gives a 2025-11-25 client the link as a tool result (APPROVAL_REQUIRED); a decline pays nothing', async () => {
  await checkLegacyLinkAndDecline(server, issuer);
});
