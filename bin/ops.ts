#!/usr/bin/env node
/**
 * The package's `idempotent-mcp-ops` bin, an alias of `idempotent-mcp ops` for this release (CHANGELOG: Deprecated):
 * the review workflow for what the engine parks for a person. See lambdas/ops/cli.ts for the commands, README "Operate" for
 * when to run which.
 */
import { aliasOf, opsCommand } from './commands';

aliasOf('idempotent-mcp-ops', 'idempotent-mcp ops');
await opsCommand(process.argv.slice(2));
