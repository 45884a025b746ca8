import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { FaultPlan } from './faults';

/** An HTTP relay on 127.0.0.1 in front of a streamable-HTTP server, applying the plan's faults to `tools/call` answers. */
export interface FaultRelay {
  /** The server's URL through the relay (same path). */
  url: string;
  /** Why the last request could not be forwarded (the client only sees its connection broken). */
  readonly forwardError: Error | undefined;
  close(): Promise<void>;
}

/** The tool a request's JSON-RPC body calls (the first `tools/call` of a batch), if any. */
function calledTool(body: Buffer): string | undefined {
  try {
    const messages = [JSON.parse(body.toString('utf8') || 'null')].flat() as Array<{ method?: unknown; params?: { name?: unknown } }>;
    const call = messages.find((message) => message?.method === 'tools/call' && typeof message.params?.name === 'string');
    return call?.params?.name as string | undefined;
  } catch {
    return undefined;
  }
}

/**
 * Forwards every request to `upstream` and its answer back, except for the `tools/call` the plan arms a fault for:
 * `lose` reads the server's answer to its end (the server ran the call) and then breaks the client's connection;
 * `delay` reads it to its end and sends it `ms` later.
 */
export async function startFaultRelay(upstream: string, plan: FaultPlan): Promise<FaultRelay> {
  const target = new URL(upstream);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  let forwardError: Error | undefined;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const tool = req.method === 'POST' ? calledTool(body) : undefined;
      const fault = tool === undefined ? undefined : plan.get(tool);
      if (fault) plan.delete(tool!);
      const forward = send(
        {
          protocol: target.protocol,
          hostname: target.hostname,
          port: target.port,
          path: req.url,
          method: req.method,
          headers: { ...req.headers, host: target.host },
        },
        (answer: IncomingMessage) => {
          if (!fault) {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
            return;
          }
          const parts: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => parts.push(chunk));
          answer.once('end', () => {
            if (fault.action === 'lose') {
              res.destroy();
              fault.onLost();
              return;
            }
            setTimeout(() => {
              res.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(parts));
              fault.onDelivered();
            }, fault.ms);
          });
        },
      );
      forward.on('error', (err) => {
        forwardError = err;
        res.destroy();
      });
      forward.end(body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const url = new URL(target.href);
  url.protocol = 'http:';
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.href,
    get forwardError() {
      return forwardError;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
