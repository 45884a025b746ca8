import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { freePort } from '../../lambdas/local/free-port';

/**
 * The registry's MCP servers the gateway is put in front of (devDependencies), by the bin each package declares.
 * Free of vitest: the gateway bench (test/bench/gateway.ts) starts them too.
 */
const require = createRequire(import.meta.url);
const binOf = (manifest: string) => {
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> };
  return join(dirname(manifest), Object.values(bin)[0]!);
};
export const REGISTRY_SERVERS = {
  'mcp-server-filesystem': binOf(require.resolve('@modelcontextprotocol/server-filesystem/package.json')),
  'mcp-server-memory': binOf(require.resolve('@modelcontextprotocol/server-memory/package.json')),
  'mcp-server-everything': binOf(require.resolve('@modelcontextprotocol/server-everything/package.json')),
} as const;

/** `mcp-server-everything streamableHttp` on a free port; resolves once it listens. */
export async function startEverything(): Promise<{ url: string; stop: () => void }> {
  const port = await freePort();
  const child = spawn(process.execPath, [REGISTRY_SERVERS['mcp-server-everything'], 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let text = '';
    child.stderr!.on('data', (chunk) => {
      text += chunk;
      if (text.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`mcp-server-everything exited (${code}): ${text}`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill('SIGKILL') };
}
