import { ensureTable, type EventPublisher } from 'idempotent-mcp/dynamodb';
import { startLocalServer, type LocalServer, type LocalServerOptions } from 'idempotent-mcp/local';
import type { ToolDefinition } from 'idempotent-mcp/mcp';
import type { Env, ServiceOverrides, Services, WorkerOverrides } from 'idempotent-mcp/lambda';
import { createSandboxRouter } from '../sandbox/router';
import { FaultInjectingPublisher } from '../sandbox/queue-faults';
import { openSandboxStore } from '../sandbox/sandbox-store';
import { tools as demoTools } from '../tools';
import { referenceDeliveries } from '../tools/reference-deliveries';
import { withReferenceClients, type ReferenceClients } from '../tools/services';
import { loadReferenceConfig, type ReferenceConfig } from '../config';

export interface LocalStackOptions {
  /** Keep state here (DynamoDB data, dev issuer key, operation-id secret): `.local` for `npm start`. Default: a temp dir, in-memory DynamoDB. */
  persistDir?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  tableName?: string;
  /** Settings on top of the process environment (same names as lambdas/config.ts). */
  env?: Env;
  /** Tools to serve instead of the registry (tests add their own). */
  tools?: readonly ToolDefinition[];
  services?: ServiceOverrides;
  /** Adds the clients the served tools call (a tools module's `withClients`) to the services, after the reference endpoint's. */
  withClients?: <B extends object>(services: B) => B;
  /** The relay, consumer and reconciler: which run here (all by default) and their tuning. */
  workers?: LocalServerOptions['workers'] & WorkerOverrides;
  /** The outbox queue's visibility timeout (default: a little over the consumer's lease). */
  queueVisibilityTimeoutSeconds?: number;
  /** How long a client may take to send its request (default LOCAL_HTTP_TIMEOUTS; tests shorten it). */
  httpTimeouts?: LocalServerOptions['httpTimeouts'];
}

export interface LocalStack extends LocalServer {
  /** The reference endpoint's own settings (its downstreams, the sandbox). */
  referenceConfig: ReferenceConfig;
  /** The MCP function's services with the reference endpoint's clients, as the deployed reference builds them. */
  services: Services & ReferenceClients;
  workers: NonNullable<LocalServer['workers']>;
  queue: NonNullable<LocalServer['queue']>;
}

/**
 * The reference endpoint as the toolkit's local server serves it (`startLocalServer`'s options): the demo tools,
 * their clients and deliveries, and the sandbox downstreams on the same server (the tools' downstream URLs name its
 * port) unless the environment names real ones. `referenceConfig` is its settings once the server has loaded them.
 */
export function referenceServer(options: LocalStackOptions = {}): { server: LocalServerOptions; referenceConfig: () => ReferenceConfig } {
  let referenceConfig: ReferenceConfig | undefined;
  const server: LocalServerOptions = {
    env: (url) => ({
      ...process.env,
      AUTH_MODE: 'dev',
      ...(options.tableName ? { TABLE_NAME: options.tableName } : {}),
      SANDBOX_ENABLED: 'true',
      PAYMENTS_URL: process.env.PAYMENTS_URL ?? `${url}/sandbox/payments`,
      TICKETS_URL: process.env.TICKETS_URL ?? `${url}/sandbox/tickets`,
      MAILBOX_URL: process.env.MAILBOX_URL ?? `${url}/sandbox/mailbox`,
      EMAIL_MODE: process.env.EMAIL_MODE ?? 'sandbox',
      ...options.env,
    }),
    tools: options.tools ?? demoTools,
    ...(options.services ? { services: options.services } : {}),
    withClients: (services, env) => {
      referenceConfig = loadReferenceConfig(env);
      const withReference = withReferenceClients(services, referenceConfig);
      return options.withClients ? options.withClients(withReference) : withReference;
    },
    async serve(services) {
      const config = referenceConfig!;
      const deliveries = referenceDeliveries(config);
      if (!config.sandboxEnabled) return { workers: { deliveries } };
      await ensureTable(services.doc, config.sandboxTableName);
      const sandbox = openSandboxStore(services, config);
      return {
        mounts: { '/sandbox': createSandboxRouter(services, config) },
        workers: {
          deliveries,
          // The sandbox's queue faults (duplicate delivery) sit between the relay and the queue.
          ...(sandbox ? { wrapPublisher: (publisher: EventPublisher) => new FaultInjectingPublisher(publisher, sandbox) } : {}),
        },
      };
    },
    ...(options.workers ? { workers: options.workers } : {}),
    ...(options.queueVisibilityTimeoutSeconds ? { queueVisibilityTimeoutSeconds: options.queueVisibilityTimeoutSeconds } : {}),
    ...(options.httpTimeouts ? { httpTimeouts: options.httpTimeouts } : {}),
  };
  return {
    server,
    referenceConfig: () => {
      if (!referenceConfig) throw new Error('the reference settings are loaded when the server starts');
      return referenceConfig;
    },
  };
}

/** What `npm start`'s banner says about the sandbox: its ledger and how to inject a fault. */
export const sandboxBanner = (server: Pick<LocalServer, 'url'>, config: ReferenceConfig): string[] =>
  config.sandboxEnabled
    ? [
        `  Sandbox ledger ${server.url}/sandbox/ledger`,
        `  Inject faults  curl -X POST ${server.url}/sandbox/faults -H 'content-type: application/json' -d '{"target":"payments","mode":"commit-then-timeout"}'`,
      ]
    : [];

/**
 * The reference endpoint on one machine, used by `npm start` and by the tests alike: the toolkit's local server
 * (`startLocalServer`) with `referenceServer`'s options.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const reference = referenceServer(options);
  const server = await startLocalServer({
    ...reference.server,
    ...(options.persistDir ? { stateDir: options.persistDir } : {}),
    port: options.port ?? 0,
  });
  if (server.config.auth.mode !== 'dev') {
    await server.stop();
    throw new Error('the local stack signs tokens with the dev issuer');
  }
  return {
    ...server,
    referenceConfig: reference.referenceConfig(),
    services: server.services as Services & ReferenceClients,
    workers: server.workers!,
    queue: server.queue!,
  };
}
