#!/usr/bin/env node
// A small stdio MCP server (SDK 1.x, low-level Server: tool names are its own strings) whose tools are named like
// Object.prototype's members, plus writes whose own arguments are the key (idempotency_key, trace_id, ref). Every
// tools/call it receives is appended to the file CALL_LOG names (one JSON line: name and arguments as received).
import { appendFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const str = { type: 'string' };
const tool = (name, properties = {}, required = []) => ({
  name,
  description: `${name} (test)`,
  inputSchema: { type: 'object', properties, required },
});
const tools = [
  ...['toString', 'constructor', 'valueOf', 'hasOwnProperty', '__proto__', 'isPrototypeOf'].map((name) => tool(name)),
  tool('book', { idempotency_key: str, what: str }, ['idempotency_key', 'what']),
  tool('trace', { trace_id: str, what: str }, ['trace_id', 'what']),
  tool('order', { ref: str, what: str }, ['ref', 'what']),
];
const server = new Server({ name: 'named-tools', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  appendFileSync(process.env.CALL_LOG, `${JSON.stringify({ name: request.params.name, arguments: request.params.arguments ?? {} })}\n`);
  return { content: [{ type: 'text', text: `ran ${request.params.name}` }] };
});
await server.connect(new StdioServerTransport());
