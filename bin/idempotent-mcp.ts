#!/usr/bin/env node
/**
 * The package's one command, `idempotent-mcp <command>`, as `cdk`, `sam` and `wrangler` work: `dev` runs a team's
 * tools module locally, `gateway` puts the endpoint in front of an MCP server, `ops` reviews what is parked for a
 * person, `check` counts the duplicates a retrying client makes on any MCP server. Each takes `--help`.
 */
import { checkCommand, devCommand, gatewayCommand, opsCommand } from './commands';

const COMMANDS = {
  dev: { run: devCommand, what: 'your tools module on a local endpoint (DynamoDB Local, sign-in, approval page, outbox, reconciler)' },
  gateway: { run: gatewayCommand, what: 'a retry-safe MCP endpoint in front of one MCP server you cannot change (docs/gateway.md)' },
  check: { run: checkCommand, what: 'a retry-safety check of any MCP server: duplicates after retries, per write tool (docs/check.md)' },
  ops: { run: opsCommand, what: 'review what the engine parked for a person: list, show, settle, recheck, redrive' },
} as const;

const USAGE = `Usage: idempotent-mcp <command> [options]

${Object.entries(COMMANDS)
  .map(([name, { what }]) => `  ${name.padEnd(9)}${what}`)
  .join('\n')}

idempotent-mcp <command> --help says more.`;

const [command, ...rest] = process.argv.slice(2);
if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
  (command === undefined ? console.error : console.log)(USAGE);
  process.exitCode = command === undefined ? 2 : 0;
} else if (Object.hasOwn(COMMANDS, command)) {
  await COMMANDS[command as keyof typeof COMMANDS].run(rest);
} else {
  console.error(`idempotent-mcp has no command "${command}": use dev, gateway, check or ops (idempotent-mcp --help).`);
  process.exitCode = 2;
}
