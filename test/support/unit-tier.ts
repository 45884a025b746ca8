/**
 * The fast tier's guard (vitest.unit.config.ts): a test that starts a child process fails at once, saying where it
 * belongs, instead of making `npm run test:unit` slow. The tier starts no DynamoDB Local either, so a test that needs
 * one fails for want of an endpoint.
 */
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';

for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const) {
  Object.assign(childProcess, {
    [name]: () => {
      throw new Error(
        `child_process.${name}: the unit tier (npm run test:unit) starts no child process; a test that needs one belongs under test/, beside the integration tests`,
      );
    },
  });
}
syncBuiltinESMExports();
delete process.env.DYNAMODB_ENDPOINT;
