#!/usr/bin/env node
/**
 * The package's `idempotent-mcp-gateway` bin (for one release; then `idempotent-mcp gateway`): a retry-safe MCP
 * endpoint in front of one upstream MCP server, with this toolkit's keys, auth, tenants, result contract, approval
 * page and reconciler, on the endpoint's DynamoDB table. Flags: lambdas/gateway/command.ts (`--help`); the policy:
 * docs/gateway.md. Here, `npm run gateway` also starts DynamoDB Local (scripts/gateway.ts).
 */
import { gatewayCommand } from './commands';

await gatewayCommand(process.argv.slice(2));
