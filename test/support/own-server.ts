import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import type { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport as V1Transport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { type AuthInfo, createMcpHandler, type McpServer } from '@modelcontextprotocol/server';

/** `Bearer <tenant>` or nothing: a team server's own (toy) verification, passing on what it found, maybe nothing. */
const authInfoOf = (request: Request): AuthInfo | undefined => {
  const tenant = request.headers.get('authorization')?.replace(/^Bearer /, '');
  return tenant ? { token: tenant, clientId: `agent-${tenant}`, scopes: [], extra: { tenant } } : undefined;
};

/** A team's own MCP servers on loopback, as a test starts them, closed together. */
export class OwnServers {
  private readonly servers: ServerType[] = [];

  /** Serves `fetch` on a free loopback port; answers its `/mcp` URL. */
  async listen(fetch: (request: Request) => Promise<Response> | Response): Promise<string> {
    const http = serve({ port: 0, hostname: '127.0.0.1', fetch });
    this.servers.push(http);
    await new Promise<void>((resolve) => http.once('listening', () => resolve()));
    return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
  }

  /** 1.x: one McpServer (made by `newServer`) and stateless transport per request, JSON answers. */
  v1(newServer: () => V1McpServer): Promise<string> {
    return this.listen(async (request) => {
      const server = newServer();
      const transport = new V1Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      try {
        return await transport.handleRequest(request, { authInfo: authInfoOf(request) });
      } finally {
        await server.close();
      }
    });
  }

  /** v2: one McpServer (made by `newServer`) per request through createMcpHandler, both eras. */
  v2(newServer: () => McpServer): Promise<string> {
    const handler = createMcpHandler(newServer);
    return this.listen((request) => handler.fetch(request, { authInfo: authInfoOf(request) }));
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((http) => new Promise<void>((resolve) => http.close(() => resolve()))));
  }
}
