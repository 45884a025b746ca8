import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * A system tool a test file needs (Chromium, spin, gcc): missing, the file fails with one sentence instead of
 * skipping. `npm test` checks and installs them first (scripts/prereqs.sh); this catches a file run on its own.
 */
export function requireSystemTools(...tools: string[]): void {
  const missing = tools.filter((tool) => !executable(tool));
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(' and ')} not found: run \`bash scripts/prereqs.sh\` (it installs what the tests need, Debian as root, or names the packages).`,
    );
  }
}

function executable(tool: string): boolean {
  const candidates = tool.includes('/')
    ? [tool]
    : (process.env.PATH ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, tool));
  return candidates.some((path) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
