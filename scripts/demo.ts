/**
 * `npm run demo`: runs the scripted agent of scripts/demo-agent.ts against a running `npm start`.
 * MCP_URL (default http://127.0.0.1:3000/mcp); TOKEN, or a token of the local dev issuer (.local/auth) for tenant demo.
 * Exits 1 if any intent did not make exactly one effect.
 */
import { devIssuerFor } from '../lambdas/auth/dev-issuer';
import { loadAuthConfig } from '../lambdas/config';
import { runDemo } from './demo-agent';

const mcpUrl = process.env.MCP_URL ?? 'http://127.0.0.1:3000/mcp';

async function devToken(tenant: string): Promise<string> {
  // The same issuer `npm start` trusts and `npm run token` signs with.
  const auth = loadAuthConfig({ ...process.env, AUTH_MODE: 'dev' });
  if (auth.mode !== 'dev') throw new Error('unreachable: dev auth requested');
  const issuer = await devIssuerFor(auth);
  return issuer.sign({ tenant });
}

try {
  const health = await fetch(new URL('/sandbox/ledger', mcpUrl)).catch(() => undefined);
  if (!health?.ok) {
    console.error(`No local endpoint with a sandbox at ${mcpUrl}: start one with \`npm start\` (or set MCP_URL).`);
    process.exit(2);
  }
  const report = await runDemo({ mcpUrl, token: process.env.TOKEN ?? (await devToken('demo')) });
  process.exit(report.ok ? 0 : 1);
} catch (err) {
  console.error(`The demo failed: ${(err as Error).message}`);
  process.exit(1);
}
