#!/usr/bin/env node
/**
 * The package's `idempotent-mcp-gateway` bin, an alias of `idempotent-mcp gateway` for this release (CHANGELOG:
 * Deprecated): a retry-safe MCP endpoint in front of one upstream MCP server. Flags: lambdas/gateway/command.ts
 * (`--help`); the policy: docs/gateway.md. Here, `npm run gateway` also starts DynamoDB Local (scripts/gateway-local.ts).
 */
import { aliasOf, gatewayCommand } from './commands';

aliasOf('idempotent-mcp-gateway', 'idempotent-mcp gateway');
await gatewayCommand(process.argv.slice(2));
