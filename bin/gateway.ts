#!/usr/bin/env node
/**
 * The package's `idempotent-mcp-gateway` bin (`npm run gateway` here): a retry-safe MCP endpoint in front of one
 * upstream MCP server, with this toolkit's keys, auth, tenants, result contract, approval page and reconciler.
 * See lambdas/gateway/command.ts for the flags and docs/gateway.md for the policy.
 */
// Logs are JSON lines on stderr; stdout carries the banner only. Metrics would be EMF noise in a terminal.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const { GATEWAY_USAGE, GatewayUsageError, parseGatewayCommand, startGatewayCommand } = await import('../lambdas/gateway/command');
const { GatewayPolicyError } = await import('../lambdas/gateway/policy');
const { CredentialsError } = await import('../lambdas/gateway/credentials');
const { ConfigError } = await import('../lambdas/config');
export {};

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(GATEWAY_USAGE);
  process.exit(0);
}

let running: Awaited<ReturnType<typeof startGatewayCommand>>;
try {
  const command = parseGatewayCommand(argv, process.env);
  running = await startGatewayCommand(command, process.env);
} catch (err) {
  const known = err instanceof GatewayUsageError || err instanceof GatewayPolicyError || err instanceof CredentialsError || err instanceof ConfigError;
  console.error(`The gateway did not start: ${known ? (err as Error).message : String((err as Error)?.stack ?? err)}`);
  if (err instanceof GatewayUsageError) console.error(`\n${GATEWAY_USAGE}`);
  process.exit(2);
}

const { gateway } = running;
const writes = gateway.tools.filter((tool) => tool.kind === 'write').map((tool) => tool.name);
const reads = gateway.tools.filter((tool) => tool.kind === 'read').map((tool) => tool.name);
const token = process.env.AUTH_MODE && process.env.AUTH_MODE !== 'dev' ? undefined : await running.tokenFor('demo');
console.log(
  [
    'Idempotent MCP gateway is running.',
    '',
    `  MCP URL        ${running.mcpUrl}`,
    `  Writes         ${writes.join(', ') || 'none'}`,
    `  Reads          ${reads.join(', ') || 'none'}`,
    `  Not served     ${gateway.hidden.join(', ') || 'none'} (not in the policy)`,
    ...(token ? [`  Tenant         demo`, `  Bearer token   ${token}`] : []),
    '',
    'Ctrl-C to stop.',
  ].join('\n'),
);

let stopping = false;
async function shutdown(reason: string) {
  if (stopping) return;
  stopping = true;
  console.log(`\n${reason}: stopping...`);
  await running.stop();
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
