#!/usr/bin/env node
// A billing MCP server of a team's own, built as the MCP SDK 1.x examples build one: over streamable HTTP it keeps
// its sessions in memory (so a restart forgets them all, and a request with a session id it does not know gets
// HTTP 404 "Session not found", as the transport spec says), or it speaks stdio. It does not deduplicate.
//   --ledger=<file>  every charge, one JSON line (the server's database: it survives a restart)
//   --log=<file>     what the server saw: { "event": "session-not-found" } per 404
//   --port=<n>       streamable HTTP on 127.0.0.1:<n>; without it, stdio
// Tools: charge({ charge_id, amount }) books a charge; a charge_id starting with "crash-" is booked, then the
// process is SIGKILLed before it answers (killed mid-call). find_charge({ charge_id }) answers "found" or "absent".
import { randomUUID } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const flags = Object.fromEntries(process.argv.slice(2).map((flag) => flag.replace(/^--/, '').split(/=(.*)/s, 2)));
const charges = () =>
  existsSync(flags.ledger)
    ? readFileSync(flags.ledger, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];

function billing() {
  const server = new McpServer({ name: 'billing', version: '1.0.0' });
  server.registerTool(
    'charge',
    { description: 'Books a charge.', inputSchema: { charge_id: z.string(), amount: z.number() } },
    async ({ charge_id, amount }) => {
      appendFileSync(flags.ledger, `${JSON.stringify({ charge_id, amount })}\n`);
      if (charge_id.startsWith('crash-')) process.kill(process.pid, 'SIGKILL');
      return { content: [{ type: 'text', text: `charged ${amount} as ${charge_id}` }] };
    },
  );
  server.registerTool(
    'find_charge',
    { description: 'Whether a charge was booked.', inputSchema: { charge_id: z.string() }, annotations: { readOnlyHint: true } },
    async ({ charge_id }) => ({
      content: [{ type: 'text', text: charges().some((charge) => charge.charge_id === charge_id) ? 'found' : 'absent' }],
    }),
  );
  return server;
}

if (flags.port === undefined) {
  await billing().connect(new StdioServerTransport());
} else {
  const sessions = new Map();
  const http = createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', async () => {
      const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      const id = req.headers['mcp-session-id'];
      if (id !== undefined) {
        const transport = sessions.get(id);
        if (!transport) {
          if (flags.log) appendFileSync(flags.log, `${JSON.stringify({ event: 'session-not-found', method: req.method })}\n`);
          res
            .writeHead(404, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
          return;
        }
        return transport.handleRequest(req, res, body);
      }
      if (req.method === 'POST' && isInitializeRequest(body)) {
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => sessions.set(sid, transport),
        });
        transport.onclose = () => sessions.delete(transport.sessionId);
        await billing().connect(transport);
        return transport.handleRequest(req, res, body);
      }
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no session' }, id: null }));
    });
  });
  http.listen(Number(flags.port), '127.0.0.1', () => console.error('billing listening'));
}
