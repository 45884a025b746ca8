/**
 * The package's commands, each run by `idempotent-mcp <command>` (bin/idempotent-mcp.ts) and, for one release, by
 * the bins they replace (`idempotent-mcp-ops`, `idempotent-mcp-gateway`). Each sets the environment its modules
 * read at load, then loads them. Errors are one line on stderr, so the AWS SDK's notice about the Node.js version
 * (lambdas/local/sdk-node-notice.ts) is turned off for all of them, here, before any command makes a client.
 */
import { Console } from 'node:console';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { quietSdkNodeNotice } from '../lambdas/local/sdk-node-notice';

quietSdkNodeNotice();

/**
 * What a bin kept for one release as an alias prints first, once, on stderr (stdout stays the command's answer);
 * then it runs the command it stands for, with the same flags.
 */
export function aliasOf(alias: string, command: string): void {
  process.stderr.write(`${alias} is deprecated and goes in the next release: use ${command} (the same flags).\n`);
}

/** The review workflow (lambdas/ops/cli.ts): stdout carries only the answer, logs and metrics go to stderr. */
export async function opsCommand(argv: readonly string[]): Promise<void> {
  // Powertools writes through the global console in dev mode, so that console is pointed at stderr before it loads.
  process.env.POWERTOOLS_DEV ??= 'true';
  process.env.POWERTOOLS_METRICS_DISABLED ??= 'false';
  process.env.POWERTOOLS_LOG_LEVEL ??= 'INFO';
  globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });
  // A TypeScript tools module (`--tools tools.ts`) loads with the project's tsx, as `idempotent-mcp dev` loads it.
  const toolsAt = argv.findIndex((arg) => arg === '--tools' || arg.startsWith('--tools='));
  const tools =
    toolsAt < 0 ? undefined : argv[toolsAt]!.startsWith('--tools=') ? argv[toolsAt]!.slice('--tools='.length) : argv[toolsAt + 1];
  if (tools && isTypeScript(tools)) {
    const problem = await typeScriptLoader('idempotent-mcp ops', tools);
    if (problem) {
      process.stderr.write(`${problem}\n`);
      process.exitCode = 2;
      return;
    }
  }
  const { runOps } = await import('../lambdas/ops/cli');
  const { logger } = await import('../lambdas/observability/logger');
  process.exitCode = await runOps(
    [...argv],
    { out: (text) => process.stdout.write(`${text}\n`), err: (text) => process.stderr.write(`${text}\n`) },
    { logger },
  );
}

/** The gateway in front of one upstream MCP server (lambdas/gateway/command.ts; docs/gateway.md). */
export async function gatewayCommand(argv: readonly string[]): Promise<void> {
  // Logs are JSON lines on stderr; stdout carries the banner only. Metrics would be EMF noise in a terminal.
  process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const { runGatewayMain } = await import('../lambdas/gateway/command');
  // `--token`'s token is the local dev issuer's, as a local server on the same state folder makes it.
  const { localDevToken } = await import('../lambdas/local/server');
  await runGatewayMain([...argv], process.env, { devToken: localDevToken });
}

/** A retry-safety check of any MCP server's write tools (lambdas/check/command.ts; docs/check.md). */
export async function checkCommand(argv: readonly string[]): Promise<void> {
  const { runCheck } = await import('../lambdas/check/command');
  process.exitCode = await runCheck([...argv], {
    out: (text) => process.stdout.write(`${text}\n`),
    err: (text) => process.stderr.write(`${text}\n`),
  });
}

export const DEV_USAGE = `Usage: idempotent-mcp dev <tools module> [options]
       idempotent-mcp dev --dynamodb-only [--port <n>]

Runs your tools module (the file your CDK app gives IdempotentMcpEndpoint as \`tools\`) on a local endpoint: the MCP
endpoint, sign-in and the approval page, the reconciler, and with --deliveries the outbox relay and consumer, on
DynamoDB Local (data kept in .local/). Prints the MCP URL and a bearer token. Ctrl-C stops it.

  --deliveries <module>  your deliveries module (IdempotentMcpEndpoint's \`deliveries\`); without it, no outbox
  --port <n>             default 3000 (PORT); 0 picks a free port
  --tenant <id>          the tenant of the printed token (default demo)
  --dynamodb-only        DynamoDB Local alone (default port 8000), for an MCP server of your own

The data, the token signing key and the operation-id secret are kept in .local/ (add it to .gitignore), where
\`idempotent-mcp ops\` finds the running endpoint with no flags.

Needs, beside idempotent-mcp: Java 17, and npm install -D amplify-dynamodb-simulator fauxqs (DynamoDB Local and a
local SQS), unless DYNAMODB_ENDPOINT and SQS_ENDPOINT name running ones; tsx for a .ts module. Your tools' settings
come from the environment, as \`environment\` gives them deployed.`;

/** The packages `idempotent-mcp dev` runs locally, each an optional peer of this package (none ships in a Lambda). */
const DEV_PEERS = [
  { name: 'amplify-dynamodb-simulator', what: 'DynamoDB Local', unlessSet: 'DYNAMODB_ENDPOINT' },
  { name: 'fauxqs', what: 'a local SQS', unlessSet: 'SQS_ENDPOINT' },
] as const;

/** `idempotent-mcp dev <tools module>`: the team's tools on the local endpoint `npm start` runs (lambdas/local/dev.ts). */
export async function devCommand(argv: readonly string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        deliveries: { type: 'string' },
        port: { type: 'string' },
        tenant: { type: 'string' },
        'dynamodb-only': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    // node:util's own words, less its advice on positionals that start with '-': one sentence.
    return usageError((err as Error).message.split('\n')[0]!.replace(/\. To specify a positional argument.*$/, ''));
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(DEV_USAGE);
    return;
  }
  if (values['dynamodb-only']) {
    if (positionals.length > 0 || values.deliveries !== undefined || values.tenant !== undefined)
      return usageError('--dynamodb-only takes no tools module, --deliveries or --tenant');
    return dynamoDbOnly(values.port);
  }
  if (positionals.length !== 1)
    return usageError(
      positionals.length === 0
        ? 'name your tools module (the file your CDK app gives IdempotentMcpEndpoint as `tools`)'
        : `one tools module, not ${positionals.length} (got ${positionals.join(', ')})`,
    );

  process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const { checkToolsModule } = await import('../lib/tools-entry');
  const { toolsOf, clientsOf } = await import('../lambdas/functions/tools-exports');
  const { deliveriesOf } = await import('../lambdas/functions/consumer-endpoint');
  const { validateTenantId } = await import('../lambdas/core/idempotency-key');
  const { localPort, runLocalEndpoint } = await import('../lambdas/local/dev');

  const tenant = values.tenant ?? 'demo';
  try {
    validateTenantId(tenant);
  } catch (err) {
    return usageError(`--tenant: ${(err as Error).message}`);
  }
  const port = localPort(values.port ?? process.env.PORT, values.port === undefined ? 'PORT' : '--port');

  const missing = DEV_PEERS.filter((peer) => !process.env[peer.unlessSet] && !resolvable(peer.name));
  if (missing.length > 0) return fail(peersMissing(missing));

  const load = async (prop: string, file: string) => {
    let path: string;
    try {
      path = checkToolsModule(prop, file, prop === '--deliveries' ? 'deliveries' : 'tools');
    } catch (err) {
      return usageError((err as Error).message);
    }
    if (isTypeScript(path)) {
      const problem = await typeScriptLoader('idempotent-mcp dev', file);
      if (problem) return fail(problem);
    }
    try {
      return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
    } catch (err) {
      return usageError(`${file} did not load: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
    }
  };
  const toolsFile = positionals[0]!;
  const toolsModule = (await load('the tools module', toolsFile))!;
  const deliveriesModule = values.deliveries === undefined ? undefined : (await load('--deliveries', values.deliveries))!;
  let served;
  try {
    const tools = toolsOf(toolsModule);
    const withClients = clientsOf(toolsModule, (services) => services);
    served = {
      tools,
      withClients: withClients as <B extends object>(services: B) => B,
      deliveries: deliveriesModule && deliveriesOf(deliveriesModule),
    };
  } catch (err) {
    return usageError((err as Error).message);
  }

  const again = ['npx idempotent-mcp dev', toolsFile, ...(values.deliveries ? ['--deliveries', values.deliveries] : [])].join(' ');
  await runLocalEndpoint({
    server: {
      tools: served.tools,
      withClients: served.withClients,
      // As IdempotentMcpEndpoint deploys it: no deliveries module, no outbox.
      env: served.deliveries ? process.env : { ...process.env, OUTBOX: 'off' },
      workers: served.deliveries ? { deliveries: served.deliveries } : {},
    },
    stateDir: '.local',
    port,
    tenant,
    serving: `your tools from ${toolsFile}${values.deliveries ? ` and deliveries from ${values.deliveries}` : ''}`,
    commands: {
      start: again,
      token: `Ctrl-C, then ${again} --tenant <id> (tokens printed before stay valid)`,
      ops: `npx idempotent-mcp ops list --tools ${toolsFile}`,
    },
  });
}

/** DynamoDB Local started from the package, alone, for a server of your own (docs/toolkit.md); data kept in .local/dynamodb. */
async function dynamoDbOnly(portText: string | undefined): Promise<void> {
  const { localPort } = await import('../lambdas/local/dev');
  const port = portText === undefined ? DYNAMODB_ONLY_PORT : localPort(portText, '--port');
  if (process.env.DYNAMODB_ENDPOINT)
    return fail(
      `DYNAMODB_ENDPOINT is set (${process.env.DYNAMODB_ENDPOINT}): that DynamoDB is running already; unset it to start DynamoDB Local here.`,
    );
  const missing = DEV_PEERS.filter((peer) => peer.name === 'amplify-dynamodb-simulator' && !resolvable(peer.name));
  if (missing.length > 0) return fail(peersMissing(missing));
  const { startDynamoDbLocal } = await import('../lambdas/local/dynamodb-local');
  const dbPath = join('.local', 'dynamodb');
  let dynamo;
  try {
    // 0: a free port, which the emulator's launcher picks when given none.
    dynamo = await startDynamoDbLocal({ dbPath, ...(port === 0 ? {} : { port }) });
  } catch (err) {
    return fail(`Could not start DynamoDB Local: ${(err as Error).message}`);
  }
  console.log(`DynamoDB Local is running on ${dynamo.endpoint} (data kept in ${dbPath}/). Point your server at it:

  DYNAMODB_ENDPOINT=${dynamo.endpoint}

Ctrl-C to stop.`);
  const stop = async () => {
    await dynamo.stop();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

const DYNAMODB_ONLY_PORT = 8000;

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

const peersMissing = (missing: ReadonlyArray<(typeof DEV_PEERS)[number]>) =>
  `idempotent-mcp dev runs ${missing.map((peer) => peer.what).join(' and ')} from ${missing.map((peer) => peer.name).join(' and ')}, not installed here: ` +
  `npm install -D ${missing.map((peer) => peer.name).join(' ')} (or set ${missing.map((peer) => peer.unlessSet).join(' and ')} to a running one).`;

/**
 * A mistake in what `dev` was given (its flags, its modules): one sentence and exit code 2, as `ops` and `gateway`
 * answer bad input; what is missing around it (a peer package, tsx) stays exit code 1.
 */
function usageError(message: string): never {
  console.error(`idempotent-mcp dev: ${message}; see idempotent-mcp dev --help`);
  process.exit(2);
}

const isTypeScript = (file: string) => /\.(ts|mts|cts)$/.test(file);

/**
 * Whether `name` is installed where Node looks for it from the project in the working directory (where the team
 * installed its packages) or from this package: a node_modules folder above either holds it. (Not require.resolve:
 * a package may export neither its package.json nor a `require` entry.)
 */
function resolvable(name: string): boolean {
  for (const start of [process.cwd(), dirname(fileURLToPath(import.meta.url))]) {
    for (let dir = start; ; dir = dirname(dir)) {
      if (existsSync(join(dir, 'node_modules', name, 'package.json'))) return true;
      if (dirname(dir) === dir) break;
    }
  }
  return false;
}

let typeScriptRegistered = false;

/**
 * Makes `import()` of a TypeScript module work, with the tsx of the team's project (its set-up installs it; the CDK
 * app runs with it): registered only when Node cannot load .ts files itself or through a loader already in place
 * (`npm run ops` here runs under tsx). Returns the one sentence to print when there is no tsx.
 */
async function typeScriptLoader(command: string, file: string): Promise<string | undefined> {
  if (process.execArgv.some((arg) => /tsx/.test(arg)) || typeScriptRegistered) return undefined;
  let api: string;
  try {
    // tsx's ESM build of its API: `require.resolve('tsx/esm/api')` names the CommonJS build, whose register() looks
    // for its loader beside itself (dist/esm/api/esm/), where there is none.
    const manifest = createRequire(join(process.cwd(), 'package.json')).resolve('tsx/package.json');
    const { exports } = JSON.parse(readFileSync(manifest, 'utf8')) as { exports: { './esm/api': { import: { default: string } } } };
    api = join(dirname(manifest), exports['./esm/api'].import.default);
  } catch {
    return `${command} loads the TypeScript module ${file} with tsx, which is not installed here: npm install -D tsx (or give the built .js module).`;
  }
  const { register } = (await import(pathToFileURL(api).href)) as { register: () => unknown };
  register();
  typeScriptRegistered = true;
  return undefined;
}
