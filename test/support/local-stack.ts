import { startInternalLocalServer, type InternalLocalServer, type InternalLocalServerOptions } from '../../lambdas/local/server';
import { referenceServer, type ReferenceServerOptions } from '../../reference/local/stack';
import type { ReferenceConfig } from '../../reference/config';
import type { ReferenceClients } from '../../reference/tools/services';

export interface LocalStackOptions extends ReferenceServerOptions {
  /** Keep state here (DynamoDB data, dev issuer key, operation-id secret): `.local` for `npm start`. Default: a temp dir, in-memory DynamoDB. */
  persistDir?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  services?: InternalLocalServerOptions['services'];
  /** The relay, consumer and reconciler: which run here (all by default) and their tuning. */
  workers?: InternalLocalServerOptions['workers'];
  /** The outbox queue's visibility timeout (default: a little over the consumer's lease). */
  queueVisibilityTimeoutSeconds?: number;
  /** How long a client may take to send its request (default LOCAL_HTTP_TIMEOUTS; tests shorten it). */
  httpTimeouts?: InternalLocalServerOptions['httpTimeouts'];
}

export interface LocalStack extends InternalLocalServer {
  /** The reference endpoint's own settings (its downstreams, the sandbox). */
  referenceConfig: ReferenceConfig;
  /** The MCP function's services with the reference endpoint's clients, as the deployed reference builds them. */
  services: InternalLocalServer['services'] & ReferenceClients;
  workers: NonNullable<InternalLocalServer['workers']>;
  queue: NonNullable<InternalLocalServer['queue']>;
}

/**
 * The reference endpoint on one machine, as `npm start` serves it (`referenceServer`'s options on the toolkit's
 * local server), with the server's services, settings and workers in view for the tests to drive and inspect.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const reference = referenceServer(options);
  const server = await startInternalLocalServer({
    ...reference.server,
    ...(options.persistDir ? { stateDir: options.persistDir } : {}),
    port: options.port ?? 0,
    ...(options.services ? { services: options.services } : {}),
    ...(options.workers ? { workers: options.workers } : {}),
    ...(options.queueVisibilityTimeoutSeconds ? { queueVisibilityTimeoutSeconds: options.queueVisibilityTimeoutSeconds } : {}),
    ...(options.httpTimeouts ? { httpTimeouts: options.httpTimeouts } : {}),
  });
  if (server.config.auth.mode !== 'dev') {
    await server.stop();
    throw new Error('the local stack signs tokens with the dev issuer');
  }
  return {
    ...server,
    referenceConfig: reference.referenceConfig(),
    services: server.services as LocalStack['services'],
    workers: server.workers!,
    queue: server.queue!,
  };
}
