import { defineConfig } from 'vitest/config';
import suite, { UNIT_TESTS } from './vitest.config';

/**
 * `npm run test:unit`: the fast tier a contributor runs on every change (`npm test` runs these too, with the rest).
 * No DynamoDB Local is started, and test/support/unit-tier.ts makes any child process a test starts fail, naming it.
 */
export default defineConfig({
  ...suite,
  test: { ...suite.test, include: UNIT_TESTS, globalSetup: [], setupFiles: ['test/support/unit-tier.ts'] },
});
