#!/usr/bin/env node
/**
 * The package's `idempotent-mcp-gateway` bin: a retry-safe MCP endpoint in front of one upstream MCP server, with this
 * toolkit's keys, auth, tenants, result contract, approval page and reconciler, on the endpoint's DynamoDB table.
 * Flags: lambdas/gateway/command.ts (`--help`); the policy: docs/gateway.md. Here, `npm run gateway` also starts
 * DynamoDB Local (scripts/gateway.ts).
 */
// Logs are JSON lines on stderr; stdout carries the banner only. Metrics would be EMF noise in a terminal.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { runGatewayMain } = await import('../lambdas/gateway/command');
await runGatewayMain(process.argv.slice(2), process.env);
export {};
