import { defineConfig } from 'vitest/config';
import base from '../../vitest.config';

/**
 * The checks `npm run conformance` runs after the official suite, with the test setup of `npm test` (DynamoDB Local,
 * the public subpaths): those that download third-party clients from the npm registry, too heavy for every `npm test`.
 */
export default defineConfig({
  ...base,
  test: { ...base.test, projects: undefined, include: ['test/conformance/**/*.test.ts'] },
});
