/**
 * The outbox consumer alone, in a process of its own, configured by the environment exactly like the Lambda
 * (the local stack's `env`). Tests kill it with SIGKILL mid-effect and start another.
 */
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const { loadWorkerConfig } = await import('../../lambdas/config');
const { createWorkerServices } = await import('../../lambdas/runtime/worker-services');
const { createWorkers } = await import('../../lambdas/runtime/workers');
const { startLocalWorkers } = await import('../../local/workers');
const { referenceDeliveries } = await import('../../reference/tools/reference-deliveries');
const { loadReferenceConfig } = await import('../../reference/config');

const services = createWorkerServices(loadWorkerConfig());
const workers = createWorkers(services, { deliveries: referenceDeliveries(loadReferenceConfig()), consumer: { retryBaseMs: 0 } });
const running = startLocalWorkers(services, workers, { relayPoller: false, reconcilerTimer: false, consumerPoller: true });
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void running.stop().then(() => process.exit(0));
});
export {};
