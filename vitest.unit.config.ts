import { defineConfig } from 'vitest/config';
import suite, { projects, UNIT_FOLDERS } from './vitest.config';

/**
 * `npm run test:unit`: the fast tier a contributor runs on every change (`npm test` runs these too, with the rest).
 * No DynamoDB Local is started, and test/support/unit-tier.ts makes any child process a test starts fail, naming it.
 */
export default defineConfig({
  ...suite,
  test: {
    ...suite.test,
    globalSetup: [],
    projects: projects(UNIT_FOLDERS, { globalSetup: [], setupFiles: ['test/support/unit-tier.ts'] }),
  },
});
