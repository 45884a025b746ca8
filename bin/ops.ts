#!/usr/bin/env node
/**
 * `npm run ops -- <command>` (and the package's `idempotent-mcp-ops` bin): the review workflow for what the engine
 * parks for a person. See ops/cli.ts for the commands, README "Operate" for when to run which.
 */
import { Console } from 'node:console';

// Stdout carries only the answer (a table, or JSON a script reads). Logs and metrics (EMF) go to stderr: Powertools
// writes through the global console in dev mode, so that console is pointed at stderr before they load.
process.env.POWERTOOLS_DEV ??= 'true';
process.env.POWERTOOLS_METRICS_DISABLED ??= 'false';
process.env.POWERTOOLS_LOG_LEVEL ??= 'INFO';
// Errors are one line on stderr; the SDK's notice about the Node.js version would come first on every run.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });

const { runOps } = await import('../ops/cli');
const { logger } = await import('../lambdas/observability/logger');

process.exitCode = await runOps(process.argv.slice(2), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}, { logger });
