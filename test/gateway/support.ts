import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { PACKAGE_ROOT } from '../../lib/package-root';
import { createTestTable } from '../support/dynamodb';
import { parseGatewayCommand, startGatewayCommand, type RunningGateway } from '../../lambdas/gateway/command';

export const ROOT = PACKAGE_ROOT;
export const BIN = join(ROOT, 'node_modules', '.bin');
export const RELAY = join(ROOT, 'test', 'gateway', 'relay.mjs');

/** A temporary folder, removed by `cleanup`. */
export async function scratch(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `gateway-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The relay's log: every `tools/call` it forwarded to the registry server. */
export interface RelayedCall {
  name: string;
  arguments: Record<string, unknown>;
  at: number;
}

export function relayedCalls(logFile: string): RelayedCall[] {
  if (!existsSync(logFile)) return [];
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RelayedCall);
}

export type Fault = { tool: string; match?: string; action: 'drop-answer' | 'delay' | 'kill'; ms?: number; times?: number };
export const setFaults = (file: string, faults: Fault[]) => writeFile(file, JSON.stringify(faults));

/** The gateway's upstream command: the relay, wrapping a registry server's bin. */
export function relayed(files: { log: string; faults: string }, server: string, ...args: string[]): string[] {
  return ['--', process.execPath, RELAY, `--log=${files.log}`, `--faults=${files.faults}`, '--', join(BIN, server), ...args];
}

export interface TestGateway extends RunningGateway {
  table: Awaited<ReturnType<typeof createTestTable>>;
  stateDir: string;
}

/** The gateway in this process (the same code its bin runs), on a fresh table of the shared DynamoDB Local. */
export async function startTestGateway(options: { policy: unknown; argv: string[]; env?: Record<string, string> }): Promise<TestGateway> {
  const table = await createTestTable();
  const { dir: stateDir } = await scratch('state');
  const policyFile = join(stateDir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(options.policy));
  const env = {
    ...process.env,
    DYNAMODB_ENDPOINT: table.endpoint,
    TABLE_NAME: table.tableName,
    AUTH_MODE: 'dev',
    RECONCILE_INTERVAL_MS: '200',
    ...options.env,
  };
  const command = parseGatewayCommand(['--policy', policyFile, '--port', '0', '--state-dir', stateDir, ...options.argv], env);
  const running = await startGatewayCommand(command, env);
  return {
    ...running,
    table,
    stateDir,
    stop: async () => {
      await running.stop();
      await table.drop();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/** A plain v2 SDK client of the gateway, as tenant. */
export async function sdkClient(gateway: Pick<RunningGateway, 'mcpUrl' | 'tokenFor'>, tenant = 'demo'): Promise<Client> {
  const token = await gateway.tokenFor(tenant);
  const client = new Client({ name: 'gateway-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

export const newKey = () => `key-${randomUUID()}`;

/** The structured result of a write (the toolkit's result contract). */
export function contract(answer: unknown): { outcome: string; replayed: boolean; retryable: boolean; result?: unknown; error?: { code: string; message: string } } {
  return (answer as { structuredContent: never }).structuredContent;
}
