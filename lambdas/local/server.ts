import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Hono } from 'hono';
import { devIssuerFor } from '../auth/dev-issuer';
import { DEV_SIGN_IN_MOUNT, EnvVars, environmentOf, loadConfig, type AppConfig } from '../config';
import { ConfigError, read, type Env } from '../env-var';
import { createApp, servedHostnames } from '../http/app';
import { createDevSignIn } from '../http/dev-sign-in';
import type { ToolDefinition } from '../mcp/tool-types';
import type { DeliveryHandler } from '../outbox/consumer';
import type { EventPublisher } from '../outbox/publisher';
import { startReconcilerFromConfig } from '../reconciler/start';
import { localOperationIdSecret } from '../runtime/operation-id-secret';
import { createServices, type ServiceOverrides, type Services } from '../runtime/services';
import { createWorkers, type WorkerOverrides, type Workers } from '../runtime/workers';
import { closeDynamoDbClient } from '../store/clients';
import { ensureTable, tableExists } from '../store/table-schema';
import { startDynamoDbLocal } from './dynamodb-local';
import { startLocalQueue, type LocalQueue } from './sqs-local';
import { startLocalWorkers, type LocalWorkerOptions } from './workers';

/**
 * How a local server is assembled: `npm start`, `idempotent-mcp dev` and `idempotent-mcp gateway` each give what
 * they serve; the rest (the state folder, DynamoDB, the queue, the settings' defaults, the HTTP timeouts, sign-in,
 * the workers) is the same for all three.
 * @public
 */
export interface LocalServerOptions {
  /**
   * The environment the settings are read from (`EnvVars`' names), or a function of the server's URL
   * (its port is taken first: settings may name routes on it). Default: `process.env`. Unset, AUTH_MODE is `dev`,
   * and in dev mode DEV_AUTH_DIR is the state folder's `auth/` and the operation-id secret the state folder's.
   */
  env?: Env | ((url: string) => Env);
  /** Keeps the state here (DynamoDB data, the dev issuer's key, the operation-id secret). Default: a temporary folder, removed at stop, and an in-memory DynamoDB Local. */
  stateDir?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Launch DynamoDB Local (unless DYNAMODB_ENDPOINT names one). Default true; false: the environment's DynamoDB, whose table must exist unless DYNAMODB_ENDPOINT is set. */
  dynamoDbLocal?: boolean;
  /** Run the outbox: a local queue (unless SQS_ENDPOINT names one), its relay and consumer. Default true; false: the reconciler alone. */
  outbox?: boolean;
  /** The tools served, unless `serve` gives them. */
  tools?: readonly ToolDefinition[];
  /** Adds the clients the served tools call (a tools module's `withClients`) to the services; `env` is the settings' environment. */
  withClients?: <B extends object>(services: B, env: Env) => B;
  /**
   * What is served that needs the services first (the gateway's tools, built on its store; the reference's
   * sandbox, on its table), added to what these options give: the tools (instead of `tools`), route groups beside
   * /mcp (beside the dev issuer's sign-in, which the server mounts itself), the outbox workers' part (the
   * deliveries, a publisher wrapper), and `close`, which undoes what it made (an upstream connection). It gets the
   * services' table client, table, logger and clock, and the records' table and key prefix (TABLE_KEY_PREFIX).
   */
  serve?: (
    services: { doc: DynamoDBDocumentClient; tableName: string; logger: Logger; clock: () => number },
    config: { tableName: string; tableKeyPrefix?: string },
  ) =>
    | Promise<{
        tools?: readonly ToolDefinition[];
        mounts?: Record<string, Hono>;
        workers?: LocalServerOptions['workers'];
        close?: () => Promise<void>;
      }>
    | {
        tools?: readonly ToolDefinition[];
        mounts?: Record<string, Hono>;
        workers?: LocalServerOptions['workers'];
        close?: () => Promise<void>;
      };
  /**
   * With the outbox: the delivery handlers by event type (a deliveries module's `deliveries`), and a wrapper around
   * the relay's publisher (the reference's sandbox puts its queue faults there).
   */
  workers?: { deliveries?: Readonly<Record<string, DeliveryHandler>>; wrapPublisher?: (publisher: EventPublisher) => EventPublisher };
  /** The outbox queue's visibility timeout (default: a little over the consumer's lease). */
  queueVisibilityTimeoutSeconds?: number;
  /** How long a client may take to send its request, and how often that is checked (default 10 s for the headers, 30 s for the request, every 1 s; tests shorten them). */
  httpTimeouts?: { headersMs?: number; requestMs?: number; checkMs?: number };
}

/**
 * A local server running (`startLocalServer`).
 * @public
 */
export interface LocalServer {
  /** e.g. http://127.0.0.1:3000 */
  url: string;
  /** The MCP endpoint: `url` + /mcp. */
  mcpUrl: string;
  /** The settings' environment, as the Lambda would read it (a worker in a child process gets the same). */
  env: Env;
  /** The tools served. */
  tools: readonly ToolDefinition[];
  /** With the outbox: its queue, and the queue its failed deliveries end in. */
  queue?: { endpoint: string; queueUrl: string; deadLetterQueueUrl: string };
  /** DynamoDB Local's data folder, when this server launched the emulator on one (not with DYNAMODB_ENDPOINT). */
  dynamoDbDataDir?: string;
  /** A bearer token of the local dev issuer for `tenant` (AUTH_MODE=dev only). */
  tokenFor(tenant: string, options?: { ttlSeconds?: number; subject?: string; scope?: string }): Promise<string>;
  /** Stops everything this server started, in reverse order. */
  stop(): Promise<void>;
}

/** The toolkit's own options besides (`idempotent-mcp dev`, the tests): parts of the services replaced, the workers' tuning. */
export interface InternalLocalServerOptions extends LocalServerOptions {
  /** Replaces parts of the services (tests). */
  services?: ServiceOverrides;
  /** With the outbox: which workers run here (all by default), their pacing and overrides. */
  workers?: LocalWorkerOptions & WorkerOverrides;
}

/** The server with what the toolkit's own code reads (the banner, the review tool's state, the tests). */
export interface InternalLocalServer extends LocalServer {
  /** The settings, as the Lambda loads them. */
  config: AppConfig;
  /** The services, with the served tools' clients. */
  services: Services;
  /** With the outbox: the workers' building blocks (tests drive `reconciler.runOnce()` or `relay.sweep()` by hand). */
  workers?: Workers;
}

/**
 * How long a client may take to send a request (not how long the answer may take: a tool runs to its own deadline).
 * An MCP call is one small JSON body (at most 1 MB), sent at once; a client slower than this holds a connection for
 * nothing. Node checks them every `checkMs` (its default, 30 s, would let a slow client stay that much longer).
 */
export const LOCAL_HTTP_TIMEOUTS = { headersMs: 10_000, requestMs: 30_000, checkMs: 1_000 } as const;

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

function listen(
  fetch: Fetch,
  port: number,
  timeouts: Record<keyof typeof LOCAL_HTTP_TIMEOUTS, number>,
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

const firstLine = (text: string) => text.split('\n')[0]!.slice(0, 300);

/**
 * Fail closed before serving: a server whose records cannot be kept would answer every write `unknown`, which
 * nothing could ever settle. With DYNAMODB_ENDPOINT (DynamoDB Local) the table is created there; else the region's
 * table must exist.
 */
async function checkStore(doc: DynamoDBDocumentClient, tableName: string, endpoint: string | undefined, env: Env): Promise<void> {
  if (!endpoint && !env.AWS_REGION && !env.AWS_DEFAULT_REGION)
    throw new ConfigError(
      'no DynamoDB to keep the records in: set DYNAMODB_ENDPOINT to a DynamoDB Local (`npx idempotent-mcp dev --dynamodb-only` starts one at http://127.0.0.1:8000), or AWS_REGION and TABLE_NAME for a deployed table',
    );
  const where = endpoint ? `at ${endpoint}` : `in ${env.AWS_REGION ?? env.AWS_DEFAULT_REGION}`;
  let exists: boolean;
  try {
    if (endpoint) await ensureTable(doc, tableName);
    exists = await tableExists(doc, tableName);
  } catch (err) {
    const error = err as Error;
    throw new ConfigError(`DynamoDB ${where} cannot be reached (${error?.name ?? 'Error'}: ${firstLine(error?.message ?? String(err))})`);
  }
  if (!exists) throw new ConfigError(`the table ${tableName} does not exist ${where}: set TABLE_NAME to the endpoint's table`);
}

/**
 * A local run's dev-mode settings: the dev issuer's key in the state folder's `auth/` (unless DEV_AUTH_DIR names
 * another and `keepDevAuthDir`), and the state folder's operation-id secret (unless one is set, or its ARN).
 */
async function applyDevDefaults(env: Env, stateDir: string, { keepDevAuthDir }: { keepDevAuthDir: boolean }): Promise<void> {
  env.DEV_AUTH_DIR = (keepDevAuthDir && env.DEV_AUTH_DIR) || join(stateDir, 'auth');
  if (!env.OPERATION_ID_SECRET && !env.OPERATION_ID_SECRET_ARN) env.OPERATION_ID_SECRET = await localOperationIdSecret(stateDir);
}

/**
 * A token of the dev issuer a local server on `stateDir` with these settings trusts, without starting one (the
 * gateway command's `--token`): the settings are read as the server reads them, so a bad one fails the same way.
 */
export async function localDevToken(tenant: string, { stateDir, env: given }: { stateDir: string; env: Env }): Promise<string> {
  const env: Env = { AUTH_MODE: 'dev', ...given };
  await applyDevDefaults(env, stateDir, { keepDevAuthDir: true });
  const { auth } = loadConfig(env);
  if (auth.mode !== 'dev') throw new ConfigError('tokens are printed only with AUTH_MODE=dev');
  return (await devIssuerFor(auth)).sign({ tenant });
}

/**
 * An endpoint on this machine, the one assembly of `npm start`, `idempotent-mcp dev` and `idempotent-mcp gateway`:
 * the HTTP server listens first (its port is part of the settings' URLs; requests wait for the app, 503 until
 * then), DynamoDB Local and the outbox queue (each gives its endpoint as the variable the Lambda would read), the
 * settings and services exactly as the Lambda builds them, the table, what is served, the HTTP app with the dev
 * issuer's sign-in, then the workers. Every step registers how to undo it; a failed start undoes them all.
 * @public
 */
export function startLocalServer(options: LocalServerOptions = {}): Promise<LocalServer> {
  return startInternalLocalServer(options);
}

/** `startLocalServer` with the toolkit's own options and view (`idempotent-mcp dev`'s banner, the tests). */
export async function startInternalLocalServer(options: InternalLocalServerOptions = {}): Promise<InternalLocalServer> {
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  };
  try {
    let stateDir: string;
    if (options.stateDir) {
      stateDir = resolve(options.stateDir);
    } else {
      stateDir = await mkdtemp(join(tmpdir(), 'idempotent-mcp-'));
      stops.push(() => rm(stateDir, { recursive: true, force: true }));
    }

    let app: ReturnType<typeof createApp> | undefined;
    const { server, port } = await listen(
      (request) => (app ? app.fetch(request) : new Response('starting', { status: 503 })),
      options.port ?? 0,
      { ...LOCAL_HTTP_TIMEOUTS, ...options.httpTimeouts },
    );
    stops.push(() => closeServer(server));
    const url = `http://127.0.0.1:${port}`;
    const given: Env = { ...(typeof options.env === 'function' ? options.env(url) : (options.env ?? process.env)) };

    // Each local service gives its endpoint as the variable the Lambda would read.
    const env: Env = { AUTH_MODE: 'dev', ...given };
    // The emulator's restarts are logged by the services' logger once it exists.
    let log = (line: string) => console.error(line);
    let reachable: (() => Promise<boolean>) | undefined;
    let dynamoDbDataDir: string | undefined;
    // A DynamoDB the settings name (a shared emulator, a proxy in front of one) is used as it is.
    if ((options.dynamoDbLocal ?? true) && !env.DYNAMODB_ENDPOINT) {
      const dynamo = await startDynamoDbLocal({
        ...(options.stateDir ? { dbPath: join(stateDir, 'dynamodb') } : {}),
        log: (line) => log(line),
      });
      stops.push(dynamo.stop);
      env.DYNAMODB_ENDPOINT = dynamo.endpoint;
      reachable = cachedProbe(() => dynamo.reachable(), STORE_PROBE_TTL_MS);
      dynamoDbDataDir = dynamo.dbPath;
    }
    env.TABLE_NAME ??= options.stateDir ? 'idempotent-mcp' : `local-${randomUUID()}`;
    // A temporary state folder owns the issuer's key; a kept one yields to DEV_AUTH_DIR.
    if (env.AUTH_MODE === 'dev') await applyDevDefaults(env, stateDir, { keepDevAuthDir: Boolean(options.stateDir) });

    let queue: LocalQueue | undefined;
    if (options.outbox ?? true) {
      // The queue's redrive count and the consumer's last attempt are one setting.
      const maxReceiveCount = read(env, EnvVars.outboxMaxReceiveCount);
      queue = await startLocalQueue({
        endpoint: env.SQS_ENDPOINT,
        queueName: `${env.TABLE_NAME}-outbox`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 80),
        // Over the consumer's lease (a verification and a delivery): a crashed consumer's message comes back after it.
        visibilityTimeoutSeconds:
          options.queueVisibilityTimeoutSeconds ?? Math.ceil((2 * read(env, EnvVars.downstreamTimeoutMs) + 1000) / 1000) + 1,
        maxReceiveCount,
      });
      stops.push(queue.stop);
      Object.assign(env, {
        SQS_ENDPOINT: queue.endpoint,
        OUTBOX_QUEUE_URL: queue.queueUrl,
        OUTBOX_DEAD_LETTER_QUEUE_URL: queue.deadLetterQueueUrl,
        ...environmentOf({ outboxMaxReceiveCount: maxReceiveCount }),
      });
    }

    const config = loadConfig(env);
    const created = createServices(config, options.services);
    const services = options.withClients?.(created, env) ?? created;
    stops.push(async () => closeDynamoDbClient(services.doc));
    log = (line) => services.logger.warn(line);
    await checkStore(services.doc, config.tableName, config.dynamodbEndpoint, env);

    const serving = (await options.serve?.(services, config)) ?? {};
    if (serving.close) stops.push(serving.close);
    const tools = serving.tools ?? options.tools ?? [];
    app = createApp(services, {
      tools,
      // Only the names this server is reached by: a rebound name's page gets nothing (DNS rebinding).
      hosts: servedHostnames(config),
      ...(reachable ? { storeReachable: reachable } : {}),
      mounts: {
        // The approval page's sign-in, locally: the dev issuer's (never in a Lambda bundle).
        ...(config.auth.mode === 'dev' && config.approvals?.signIn
          ? { [DEV_SIGN_IN_MOUNT]: createDevSignIn(config.auth, services.clock) }
          : {}),
        ...serving.mounts,
      },
    });

    let workers: Workers | undefined;
    if (queue) {
      // The relay, the consumer and the reconciler around the Lambda handlers' code.
      const built = createWorkers(services, { tools, ...serving.workers, ...options.workers });
      workers = built;
      stops.push(async () => built.sqs.destroy());
      stops.push(startLocalWorkers(services, built, options.workers).stop);
    } else {
      const reconciler = startReconcilerFromConfig(config.sideEffects, {
        tools,
        store: services.store,
        logger: services.logger,
        metrics: false,
      });
      stops.push(() => reconciler.stop());
    }

    const auth = config.auth;
    let issuer: ReturnType<typeof devIssuerFor> | undefined;
    return {
      url,
      mcpUrl: `${url}/mcp`,
      config,
      env,
      services,
      tools,
      ...(workers ? { workers } : {}),
      ...(queue ? { queue } : {}),
      ...(dynamoDbDataDir ? { dynamoDbDataDir } : {}),
      async tokenFor(tenant, tokenOptions = {}) {
        if (auth.mode !== 'dev') throw new ConfigError('tokens are printed only with AUTH_MODE=dev');
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
