/**
 * The outbox consumer alone, in a process of its own, configured by the environment exactly like the Lambda
 * (the local stack's `env`), delivering the fixture tools' events to the fixture downstream whose URL is its first
 * argument. Tests kill it with SIGKILL mid-effect and start another.
 */
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const { loadWorkerConfig } = await import('../../lambdas/config');
const { createWorkerServices } = await import('../../lambdas/runtime/worker-services');
const { createWorkers } = await import('../../lambdas/runtime/workers');
const { startLocalWorkers } = await import('../../local/workers');
const { fixtureTools } = await import('./fixture-tools');

const downstreamUrl = process.argv[2];
if (!downstreamUrl) throw new Error('consumer-worker: give the fixture downstream URL as the first argument');
const services = createWorkerServices(loadWorkerConfig());
const { deliveries } = fixtureTools({ url: downstreamUrl }, services.config.sideEffects.downstreamTimeoutMs);
const workers = createWorkers(services, { deliveries, consumer: { retryBaseMs: 0 } });
const running = startLocalWorkers(services, workers, { relayPoller: false, reconcilerTimer: false, consumerPoller: true });
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void running.stop().then(() => process.exit(0));
});
export {};
