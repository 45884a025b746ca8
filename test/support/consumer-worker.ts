/**
 * The outbox consumer alone, in a process of its own, configured by the environment exactly like the Lambda
 * (the local stack's `env`), delivering the fixture tools' events to the fixture downstream whose URL is its first
 * argument. Tests kill it with SIGKILL mid-effect and start another. It says `loaded` once its modules are in, and
 * starts consuming (then says `ready`) at once, or, with `--standby`, when a line arrives on stdin: a test loads the
 * next consumer while the current one works, and starts it the moment it is needed.
 */
import { once } from 'node:events';

process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const { loadWorkerConfig } = await import('../../lambdas/config');
const { createWorkerServices } = await import('../../lambdas/runtime/worker-services');
const { createWorkers } = await import('../../lambdas/runtime/workers');
const { startLocalWorkers } = await import('../../lambdas/local/workers');
const { fixtureTools } = await import('./fixture-tools');

const [downstreamUrl, mode] = process.argv.slice(2);
if (!downstreamUrl) throw new Error('consumer-worker: give the fixture downstream URL as the first argument');
process.stdout.write('loaded\n');
if (mode === '--standby') await once(process.stdin, 'data');
const services = createWorkerServices(loadWorkerConfig());
const { deliveries } = fixtureTools({ url: downstreamUrl }, services.config.sideEffects.downstreamTimeoutMs);
const workers = createWorkers(services, { deliveries, consumer: { retryBaseMs: 0 } });
const running = startLocalWorkers(services, workers, { relayPoller: false, reconcilerTimer: false, consumerPoller: true });
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void running.stop().then(() => process.exit(0));
});
