/**
 * The `shared` project's setup file (vitest.config.ts): its files share their process, so each must leave it as it
 * found it. After a file's own hooks, this one checks the two things a test file may change for the files after it
 * and vitest's shared workers do not undo: the environment (`vi.stubEnv` or a write to `process.env`) and fake
 * timers. A file that left either changed fails here, naming what it left, and the process is put back, so the
 * files after it see what they would see alone (the failure is the file that leaked, never a later one). Node's
 * Request and Response, which a library replaces for the whole process, are put back too, without failing.
 */
import { afterAll, vi } from 'vitest';
// Powertools (its commons, which every Powertools package imports) adds itself to AWS_SDK_UA_APP_ID when first
// imported in a process, once: imported here first, so the file that happens to import it first is not the one that
// changed the environment.
import '@aws-lambda-powertools/logger';

// Read before the test file is imported (setup files run first): what its top level changes counts too.
const found = { ...process.env };
// Node's Request and Response, which @hono/node-server's serve() (the local stack's, the gateway's) replaces with
// its own for the rest of the process: put back after each file, as a process of its own would start with them.
const WEB_GLOBALS = ['Request', 'Response'] as const;
const webGlobals = WEB_GLOBALS.map((name) => [name, Object.getOwnPropertyDescriptor(globalThis, name)!] as const);

afterAll(() => {
  // Registered before the file's own hooks, so it runs after them (vitest's `sequence.hooks: 'stack'`).
  const fakeTimers = vi.isFakeTimers();
  const changed = [...new Set([...Object.keys(found), ...Object.keys(process.env)])]
    .filter((name) => process.env[name] !== found[name])
    .sort();
  vi.useRealTimers();
  vi.unstubAllEnvs();
  for (const [name, descriptor] of webGlobals) Object.defineProperty(globalThis, name, descriptor);
  for (const name of Object.keys(process.env)) if (!(name in found)) delete process.env[name];
  Object.assign(process.env, found);
  const left = [
    ...(changed.length > 0
      ? [`environment variables changed (${changed.join(', ')}): undo them in an afterAll/afterEach (vi.unstubAllEnvs() after vi.stubEnv)`]
      : []),
    ...(fakeTimers ? ['fake timers on: vi.useRealTimers() in an afterAll/afterEach'] : []),
  ];
  if (left.length > 0)
    throw new Error(`this file shares its process with others (vitest.config.ts, project "shared") and left ${left.join('; and ')}`);
});
