import { Hono } from 'hono';
import type { ReferenceConfig } from '../config';
import { createSandboxDownstreams } from './downstreams';
import { readLedger } from './ledger';
import { openSandboxStore, type SandboxServices } from './sandbox-store';

/**
 * The local sandbox (`/sandbox/*`): served only when SANDBOX_ENABLED=true, never by a default deployment.
 * Unauthenticated on purpose: it is a test fixture showing every tenant's effects, so one call = one effect can be seen.
 */
export function createSandboxRouter(services: SandboxServices, config: ReferenceConfig): Hono {
  const router = new Hono();
  router.get('/ledger', async (c) => c.json(await readLedger(services, config)));
  const store = openSandboxStore(services, config);
  if (store) {
    const timeoutMs = config.downstreamTimeoutMs;
    // Payments, tickets and mailbox (with fault injection) and POST /sandbox/faults.
    router.route(
      '/',
      createSandboxDownstreams({
        store,
        clock: services.clock,
        defaultHoldMs: timeoutMs + 1000,
        defaultSlowMs: Math.floor(timeoutMs / 2),
      }),
    );
  }
  return router;
}
