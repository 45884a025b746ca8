import { ensureTable, type EventPublisher } from 'idempotent-mcp/dynamodb';
import type { LocalServer, LocalServerOptions } from 'idempotent-mcp/local';
import type { ToolDefinition } from 'idempotent-mcp/mcp';
import type { Env } from 'idempotent-mcp/lambda';
import { createSandboxRouter } from '../sandbox/router';
import { FaultInjectingPublisher } from '../sandbox/queue-faults';
import { openSandboxStore } from '../sandbox/sandbox-store';
import { tools as demoTools } from '../tools';
import { referenceDeliveries } from '../tools/reference-deliveries';
import { withReferenceClients } from '../tools/services';
import { loadReferenceConfig, type ReferenceConfig } from '../config';

/** What the reference endpoint on a local server serves besides its own tools and sandbox. */
export interface ReferenceServerOptions {
  tableName?: string;
  /** Settings on top of the process environment (the names of `EnvVars` and of the reference's settings). */
  env?: Env;
  /** Tools to serve instead of the registry (tests add their own). */
  tools?: readonly ToolDefinition[];
  /** Adds the clients the served tools call (a tools module's `withClients`) to the services, after the reference endpoint's. */
  withClients?: <B extends object>(services: B) => B;
}

/**
 * The reference endpoint as the toolkit's local server serves it (`startLocalServer`'s options): the demo tools,
 * their clients and deliveries, and the sandbox downstreams on the same server (the tools' downstream URLs name its
 * port) unless the environment names real ones. `referenceConfig` is its settings once the server has loaded them.
 */
export function referenceServer(options: ReferenceServerOptions = {}): {
  server: LocalServerOptions;
  referenceConfig: () => ReferenceConfig;
} {
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
