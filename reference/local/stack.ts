import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { closeDynamoDbClient, ensureTable } from 'idempotent-mcp/dynamodb';
import type { ToolDefinition } from 'idempotent-mcp/mcp';
import {
  createApp,
  createDevSignIn,
  createServices,
  createWorkers,
  DEV_SIGN_IN_MOUNT,
  devIssuerFor,
  EnvVars,
  localOperationIdSecret,
  environmentOf,
  loadConfig,
  read,
  servedHostnames,
  type AppConfig,
  type DevIssuer,
  type Env,
  type ServiceOverrides,
  type Services,
  type WorkerOverrides,
  type Workers,
} from 'idempotent-mcp/lambda';
import { createSandboxRouter } from '../sandbox/router';
import { FaultInjectingPublisher } from '../sandbox/queue-faults';
import { openSandboxStore } from '../sandbox/sandbox-store';
import { tools as demoTools } from '../tools';
import { referenceDeliveries } from '../tools/reference-deliveries';
import { withReferenceClients, type ReferenceClients } from '../tools/services';
import { loadReferenceConfig, type ReferenceConfig } from '../config';
import { startDynamoDbLocal } from '../../lambdas/local/dynamodb-local';
import { startLocalQueue, type LocalQueue } from '../../lambdas/local/sqs-local';
import { startLocalWorkers, type LocalWorkerOptions } from '../../lambdas/local/workers';

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
  workers?: LocalWorkerOptions & WorkerOverrides;
  /** The outbox queue's visibility timeout (default: a little over the consumer's lease). */
  queueVisibilityTimeoutSeconds?: number;
  /** How long a client may take to send its request (default LOCAL_HTTP_TIMEOUTS; tests shorten it). */
  httpTimeouts?: Partial<Record<keyof typeof LOCAL_HTTP_TIMEOUTS, number>>;
}

export interface LocalStack {
  /** e.g. http://127.0.0.1:3000 */
  url: string;
  mcpUrl: string;
  config: AppConfig;
  /** The reference endpoint's own settings (its downstreams, the sandbox). */
  referenceConfig: ReferenceConfig;
  /** The settings `config` was loaded from (a worker in a child process gets the same). */
  env: Env;
  /** The MCP function's services with the reference endpoint's clients, as the deployed reference builds them. */
  services: Services & ReferenceClients;
  /** The workers' building blocks (tests drive `reconciler.runOnce()` or `relay.sweep()` by hand). */
  workers: Workers;
  queue: LocalQueue;
  /** DynamoDB Local's data folder, when this stack launched the emulator on one (not with DYNAMODB_ENDPOINT). */
  dynamoDbDataDir?: string;
  /** A bearer token of the local dev issuer for `tenant`. */
  tokenFor(tenant: string, options?: { ttlSeconds?: number; subject?: string; scope?: string }): Promise<string>;
  /** Stops everything this stack started, in reverse order. */
  stop(): Promise<void>;
}

/** /health asks the store at most this often, however often it is called. */
const STORE_PROBE_TTL_MS = 1_000;

/** One probe for every caller within `ttlMs`: concurrent callers share the one in flight. */
function cachedProbe(probe: () => Promise<boolean>, ttlMs: number): () => Promise<boolean> {
  let last: { at: number; answer: Promise<boolean> } | undefined;
  return () => {
    if (!last || Date.now() - last.at > ttlMs) last = { at: Date.now(), answer: probe().catch(() => false) };
    return last.answer;
  };
}

type Fetch = (request: Request) => Response | Promise<Response>;

/**
 * How long a client may take to send a request (not how long the answer may take: a tool runs to its own deadline).
 * An MCP call is one small JSON body (at most 1 MB), sent at once; a client slower than this holds a connection for
 * nothing. Node checks them every `checkMs` (its default, 30 s, would let a slow client stay that much longer).
 */
export const LOCAL_HTTP_TIMEOUTS = { headersMs: 10_000, requestMs: 30_000, checkMs: 1_000 } as const;

function listen(
  fetch: Fetch,
  port: number,
  timeouts: { headersMs: number; requestMs: number; checkMs: number },
): Promise<{ server: ServerType; port: number }> {
  return new Promise((resolvePromise, reject) => {
    const serverOptions = {
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      connectionsCheckingInterval: timeouts.checkMs,
    };
    const server = serve({ fetch, port, hostname: '127.0.0.1', serverOptions }, (info: AddressInfo) =>
      resolvePromise({ server, port: info.port }),
    );
    server.once('error', reject);
  });
}

function closeServer(server: ServerType): Promise<void> {
  return new Promise((resolvePromise) => {
    server.close(() => resolvePromise());
    // Keep-alive connections would hold close() open.
    if ('closeAllConnections' in server) server.closeAllConnections();
  });
}

/**
 * Everything the endpoint needs on one machine, used by `npm start` and by the tests alike:
 * local services first (each adds the env it provides; the HTTP server listens early, its port is part of the
 * sandbox URLs), then config and services, the HTTP app, then background workers. Every step registers how to
 * undo it.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  };
  try {
    let stateDir: string;
    if (options.persistDir) {
      stateDir = resolve(options.persistDir);
    } else {
      stateDir = await mkdtemp(join(tmpdir(), 'idempotent-mcp-'));
      stops.push(() => rm(stateDir, { recursive: true, force: true }));
    }

    // 1. Local services. Each provides its endpoint as the env var the Lambda would read.
    const env: Env = { ...process.env };
    // The emulator's restarts are logged by the services' logger once it exists.
    let log = (line: string) => console.error(line);
    const dynamo = await startDynamoDbLocal({
      ...(options.persistDir ? { dbPath: join(stateDir, 'dynamodb') } : {}),
      log: (line) => log(line),
    });
    stops.push(dynamo.stop);
    env.DYNAMODB_ENDPOINT = dynamo.endpoint;
    const tableName = options.tableName ?? env.TABLE_NAME ?? (options.persistDir ? 'idempotent-mcp' : `local-${randomUUID()}`);

    // The port comes first: the sandbox downstreams' URLs name it. Requests wait for the app (503 until then).
    let app: ReturnType<typeof createApp> | undefined;
    const { server, port } = await listen(
      (request) => (app ? app.fetch(request) : new Response('starting', { status: 503 })),
      options.port ?? 0,
      { ...LOCAL_HTTP_TIMEOUTS, ...options.httpTimeouts },
    );
    stops.push(() => closeServer(server));
    const url = `http://127.0.0.1:${port}`;

    const givenEnv: Env = { ...env, ...options.env };
    const downstreamTimeoutMs = read(givenEnv, EnvVars.downstreamTimeoutMs);
    // The queue's redrive count and the consumer's last attempt are one setting.
    const maxReceiveCount = read(givenEnv, EnvVars.outboxMaxReceiveCount);
    const queue = await startLocalQueue({
      endpoint: env.SQS_ENDPOINT,
      queueName: `${tableName}-outbox`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 80),
      // Over the consumer's lease (a verification and a delivery): a crashed consumer's message comes back after it.
      visibilityTimeoutSeconds: options.queueVisibilityTimeoutSeconds ?? Math.ceil((2 * downstreamTimeoutMs + 1000) / 1000) + 1,
      maxReceiveCount,
    });
    stops.push(queue.stop);
    env.SQS_ENDPOINT = queue.endpoint;
    env.OUTBOX_QUEUE_URL = queue.queueUrl;
    env.OUTBOX_DEAD_LETTER_QUEUE_URL = queue.deadLetterQueueUrl;

    // 2. Configuration and services, exactly as the Lambda builds them, with the dev issuer and the sandbox
    //    downstreams (on this server) unless the environment names real ones.
    const configEnv: Env = {
      ...env,
      TABLE_NAME: tableName,
      AUTH_MODE: 'dev',
      DEV_AUTH_DIR: (options.persistDir && env.DEV_AUTH_DIR) || join(stateDir, 'auth'),
      OPERATION_ID_SECRET: env.OPERATION_ID_SECRET ?? (await localOperationIdSecret(stateDir)),
      SANDBOX_ENABLED: 'true',
      PAYMENTS_URL: env.PAYMENTS_URL ?? `${url}/sandbox/payments`,
      TICKETS_URL: env.TICKETS_URL ?? `${url}/sandbox/tickets`,
      MAILBOX_URL: env.MAILBOX_URL ?? `${url}/sandbox/mailbox`,
      EMAIL_MODE: env.EMAIL_MODE ?? 'sandbox',
      ...options.env,
      ...environmentOf({ outboxMaxReceiveCount: maxReceiveCount }),
    };
    const config = loadConfig(configEnv);
    const referenceConfig = loadReferenceConfig(configEnv);
    const withClients = options.withClients ?? ((given) => given);
    const services = withClients(withReferenceClients(createServices(config, options.services), referenceConfig));
    stops.push(async () => closeDynamoDbClient(services.doc));
    log = (line) => services.logger.warn(line);
    await ensureTable(services.doc, config.tableName);
    if (referenceConfig.sandboxEnabled) await ensureTable(services.doc, referenceConfig.sandboxTableName);

    // 3. The HTTP app (the sandbox downstreams the workers call are part of it).
    app = createApp(services, {
      tools: options.tools ?? demoTools,
      // Only the names this server is reached by: a rebound name's page gets nothing (DNS rebinding).
      hosts: servedHostnames(config),
      storeReachable: cachedProbe(() => dynamo.reachable(), STORE_PROBE_TTL_MS),
      mounts: {
        // The approval page's sign-in, locally: the dev issuer's (never in a Lambda bundle).
        ...(config.auth.mode === 'dev' && config.approvals?.signIn
          ? { [DEV_SIGN_IN_MOUNT]: createDevSignIn(config.auth, services.clock) }
          : {}),
        ...(referenceConfig.sandboxEnabled ? { '/sandbox': createSandboxRouter(services, referenceConfig) } : {}),
      },
    });

    // 4. Background workers: the relay, the consumer and the reconciler around the Lambda handlers' code.
    const sandbox = openSandboxStore(services, referenceConfig);
    const workers = createWorkers(services, {
      tools: options.tools ?? demoTools,
      deliveries: referenceDeliveries(referenceConfig),
      // The sandbox's queue faults (duplicate delivery) sit between the relay and the queue.
      wrapPublisher: sandbox ? (publisher) => new FaultInjectingPublisher(publisher, sandbox) : undefined,
      ...options.workers,
    });
    stops.push(async () => workers.sqs.destroy());
    const running = startLocalWorkers(services, workers, options.workers);
    stops.push(running.stop);

    let issuer: Promise<DevIssuer> | undefined;
    const auth = config.auth;
    if (auth.mode !== 'dev') throw new Error('the local stack signs tokens with the dev issuer');
    return {
      url,
      mcpUrl: `${url}/mcp`,
      config,
      referenceConfig,
      env: configEnv,
      services,
      workers,
      queue,
      dynamoDbDataDir: dynamo.dbPath,
      async tokenFor(tenant, tokenOptions = {}) {
        issuer ??= devIssuerFor(auth);
        return (await issuer).sign({ tenant, ...tokenOptions });
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
