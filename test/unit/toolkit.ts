import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';

/**
 * The toolkit, what a team installs: the public subpaths' entry files (`exports/`), the runtime (`lambdas/`, the
 * review tool `lambdas/ops/` included), the constructs (`lib/`) and the agent's client (`client/`). Everything else
 * (the reference endpoint, `local/`, `scripts/`, `bin/app.ts`, the tests) is this repository's own. The whole-project
 * checks of this folder walk these folders; this is the one list of them.
 */
export const TOOLKIT = ['exports', 'lambdas', 'lib', 'client'] as const;

/**
 * The modules under a folder, relative to the project root. A module's tests sit beside it
 * (lambdas/core/fingerprint.test.ts): they are no toolkit module, ship nowhere and may import anything, so they are left out.
 */
export const modulesUnder = (folder: string): string[] =>
  readdirSync(join(PROJECT_ROOT, folder), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? modulesUnder(join(folder, entry.name))
      : entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')
        ? [join(folder, entry.name)]
        : [],
  );

/** Every toolkit module (its tests left out), relative to the project root. */
export const toolkitModules = (): string[] => TOOLKIT.flatMap(modulesUnder);
