import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A loopback HTTP proxy in front of the MCP server that breaks real sockets, so the client meets the errors
 * undici really raises (not imitations of them).
 * - `reset-before`: the connection is destroyed before anything is forwarded (nothing ran).
 * - `reset-after`: the request is forwarded and fully answered, then the client's connection is destroyed (a lost answer).
 * - `status`: answered here with this status (and Retry-After), nothing forwarded.
 */
export type ProxyFault =
  | { mode: 'reset-before' }
  | { mode: 'reset-after' }
  | { mode: 'status'; status: number; retryAfterSeconds?: number };

export interface FaultProxy {
  url: string;
  /** Faults the next `times` `tools/call` POSTs of `tool`. */
  inject(tool: string, fault: ProxyFault, times: number): void;
  /** `tools/call` POSTs seen for a tool (faulted or not). */
  callsTo(tool: string): number;
  /** Drops the faults not yet spent. */
  clear(): void;
  stop(): Promise<void>;
}

function toolOf(body: Buffer): string | undefined {
  try {
    const message = JSON.parse(body.toString('utf8')) as { method?: unknown; params?: { name?: unknown } };
    return message.method === 'tools/call' && typeof message.params?.name === 'string' ? message.params.name : undefined;
  } catch {
    return undefined;
  }
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const upstream = new URL(target);
  const rules: { tool: string; fault: ProxyFault; times: number }[] = [];
  const calls = new Map<string, number>();
  const sockets = new Set<Socket>();

  const forward = (req: IncomingMessage, body: Buffer, res: ServerResponse, onDone?: () => void) => {
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
      (answer) => {
        if (onDone) {
          // The server's answer is consumed in full, then the way back is cut.
          answer.resume();
          answer.on('end', onDone);
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    out.end(body);
  };

  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const tool = req.method === 'POST' ? toolOf(body) : undefined;
    if (tool) calls.set(tool, (calls.get(tool) ?? 0) + 1);
    const rule = tool ? rules.find((r) => r.tool === tool && r.times > 0) : undefined;
    if (!rule) return forward(req, body, res);
    rule.times -= 1;
    switch (rule.fault.mode) {
      case 'reset-before':
        return req.socket.destroy();
      case 'reset-after':
        return forward(req, body, res, () => req.socket.destroy());
      case 'status': {
        const headers: Record<string, string> = { 'content-type': 'text/plain' };
        if (rule.fault.retryAfterSeconds !== undefined) headers['retry-after'] = String(rule.fault.retryAfterSeconds);
        res.writeHead(rule.fault.status, headers).end('injected by the fault proxy');
      }
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}${upstream.pathname}`,
    inject: (tool, fault, times) => rules.push({ tool, fault, times }),
    callsTo: (tool) => calls.get(tool) ?? 0,
    clear: () => rules.splice(0),
    stop: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
