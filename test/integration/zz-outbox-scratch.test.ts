import { it } from 'vitest';
import { startFixtureStack } from '../support/fixture-tools';
import { startLocalQueue } from '../../local/sqs-local';
it('times', async () => {
  for (let i = 0; i < 3; i++) {
    const c0 = process.cpuUsage(); const t0 = performance.now();
    const stack = await startFixtureStack({ workers: { reconcilerTimer: false } });
    const t1 = performance.now(); const c1 = process.cpuUsage(c0);
    await stack.stop();
    const t2 = performance.now();
    console.log('stack start', Math.round(t1 - t0), 'ms wall', Math.round((c1.user + c1.system) / 1000), 'ms cpu; stop', Math.round(t2 - t1));
  }
  for (let i = 0; i < 3; i++) {
    const c0 = process.cpuUsage(); const t0 = performance.now();
    const q = await startLocalQueue({ queueName: 'x' + i, visibilityTimeoutSeconds: 3, maxReceiveCount: 5 });
    const t1 = performance.now(); const c1 = process.cpuUsage(c0);
    await q.stop();
    console.log('queue start', Math.round(t1 - t0), 'ms wall', Math.round((c1.user + c1.system) / 1000), 'ms cpu');
  }
}, 120_000);
