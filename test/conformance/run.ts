/**
 * `npm run conformance`: the official MCP conformance suite (@modelcontextprotocol/conformance) against the local
 * stack, through a small proxy that adds a bearer token (the suite sends none). The suite needs Node 22: it runs on a
 * Node 22 binary installed from the npm registry into test/conformance/.tools (test/conformance/install.sh), never the
 * machine's node. Scenarios that cannot apply to this server are listed with their reasons in baseline.yml.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { startLocalStack } from '../support/local-stack';

const TOOLS = join(import.meta.dirname, '.tools', 'node_modules');
const node22 = join(TOOLS, '.bin', 'node');
const suite = join(TOOLS, '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
if (!existsSync(node22) || !existsSync(suite)) {
  console.error('The conformance tools are not installed: run test/conformance/install.sh first.');
  process.exit(2);
}

const stack = await startLocalStack();
const token = await stack.tokenFor('conformance');
const proxy = serve({
  hostname: '127.0.0.1',
  port: 0,
  fetch: async (request) => {
    const url = new URL(request.url);
    const headers = new Headers(request.headers);
    headers.set('authorization', `Bearer ${token}`);
    headers.delete('host');
    const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer();
    return fetch(`${stack.url}${url.pathname}${url.search}`, { method: request.method, headers, body, redirect: 'manual' });
  },
});
await new Promise<void>((resolve) => proxy.once('listening', () => resolve()));
const { port } = proxy.address() as AddressInfo;

const code = await new Promise<number>((resolve) => {
  const child = spawn(
    node22,
    [
      suite,
      'server',
      '--url',
      `http://127.0.0.1:${port}/mcp`,
      '--expected-failures',
      join(import.meta.dirname, 'baseline.yml'),
      ...process.argv.slice(2),
    ],
    { stdio: 'inherit' },
  );
  child.on('exit', (exitCode) => resolve(exitCode ?? 1));
});
proxy.close();
await stack.stop();
process.exit(code);
