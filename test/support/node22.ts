import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * The Node 22 of Lambda's nodejs22.x runtime: the binary of the npm registry's `node` package that
 * test/conformance/install.sh installs (one install for both; the suite's global set-up runs it before the tests).
 */
export function node22(): string {
  const binary = join(PROJECT_ROOT, 'test/conformance/.tools/node_modules/.bin/node');
  if (!existsSync(binary))
    throw new Error(
      "Node 22 is not installed: the suite's global set-up installs it (test/support/global-setup.ts); run this file through vitest's root config, or `bash test/conformance/install.sh`",
    );
  return binary;
}
