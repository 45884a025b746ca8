#!/usr/bin/env node
/**
 * `npm run ops -- <command>`, and the package's `idempotent-mcp-ops` bin (for one release; then `idempotent-mcp ops`):
 * the review workflow for what the engine parks for a person. See ops/cli.ts for the commands, README "Operate" for
 * when to run which.
 */
import { opsCommand } from './commands';

await opsCommand(process.argv.slice(2));
