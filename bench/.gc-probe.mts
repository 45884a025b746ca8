import { buildLambdaBundle, startColdStartFixture } from './cold-start';
import { spawnSync } from 'node:child_process';
const dep = await buildLambdaBundle('/tmp/cold/dep/index.mjs', {});
const floor = await buildLambdaBundle('/tmp/cold/floor/index.mjs', { entry: 'bench/cold-start-floor.ts' });
const fx = await startColdStartFixture({ workDir: '/tmp/cold/fx' });
try {
  for (const args of (JSON.parse(process.argv[2] ?? '[[]]') as string[][])) {
    for (const [name, b] of [['deployed', dep], ['floor', floor]] as const) {
      await fx.run(b.file, args);
      const r = await fx.run(b.file, ['--trace-gc', ...args]);
      console.log(r.stdout.split('\n').filter(l=>/Scavenge|Mark/.test(l)).join('\n'));console.log(name, args.join(' '), 'init', (r.called - r.booted).toFixed(1), 'cpu', (r.cpuMs - r.bootCpu).toFixed(1));
    }
  }
} finally { await fx.stop(); }
