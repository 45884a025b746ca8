import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What the proxy does to a matching request:
 * - `fail`: answers HTTP 500 InternalServerError without forwarding (nothing is applied);
 * - `throttle`: answers HTTP 400 ProvisionedThroughputExceededException without forwarding (nothing is applied);
 * - `drop-response`: forwards it (DynamoDB applies it), then cuts the connection before the answer arrives.
 */
export type DynamoDbFault = 'fail' | 'throttle' | 'drop-response';

export interface FaultRule {
  /** The DynamoDB operation, e.g. `TransactWriteItems`, `UpdateItem`, `PutItem`. */
  operation: string;
  fault: DynamoDbFault;
  /** How many matching requests get the fault (SDK retries count: the client tries 3 times). */
  times: number;
  /** Narrows the match, e.g. to the request that writes SUCCEEDED. */
  bodyIncludes?: string;
}

export interface DynamoDbFaultProxy {
  endpoint: string;
  inject(rule: FaultRule): void;
  /** How many requests each rule has faulted so far, in injection order. */
  faulted(): number[];
  /** Every request the proxy received, in order: its operation and body. */
  received(): ReadonlyArray<{ operation: string; body: string }>;
  clear(): void;
  stop(): Promise<void>;
}

/**
 * A real HTTP proxy in front of DynamoDB Local that breaks chosen requests the way a network or the service can:
 * the client sees genuine 500s and connection resets, so the SDK's own retries run as they would in AWS.
 */
export async function startDynamoDbFaultProxy(target: string): Promise<DynamoDbFaultProxy> {
  const targetUrl = new URL(target);
  const rules: (FaultRule & { used: number })[] = [];
  const seen: { operation: string; body: string }[] = [];

  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const text = body.toString('utf8');
    const operation =
      String(req.headers['x-amz-target'] ?? '')
        .split('.')
        .pop() ?? '';
    seen.push({ operation, body: text });
    const rule = rules.find((r) => r.used < r.times && r.operation === operation && (!r.bodyIncludes || text.includes(r.bodyIncludes)));
    if (rule) rule.used++;
    if (rule?.fault === 'throttle') {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(
        JSON.stringify({
          __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
          message: 'injected throttling',
        }),
      );
      return;
    }
    if (rule?.fault === 'fail') {
      res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'injected fault' }));
      return;
    }
    const upstream = httpRequest(
      {
        host: targetUrl.hostname,
        port: targetUrl.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: targetUrl.host },
      },
      async (upstreamRes) => {
        const answer = await readBody(upstreamRes);
        if (rule?.fault === 'drop-response') {
          req.socket.destroy(); // applied by DynamoDB, never answered
          return;
        }
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        res.end(answer);
      },
    );
    upstream.on('error', () => req.socket.destroy());
    upstream.end(body);
  });
  const { endpoint, stop } = await listenOnLoopback(server);

  return {
    endpoint,
    inject: (rule) => rules.push({ ...rule, used: 0 }),
    faulted: () => rules.map((r) => r.used),
    received: () => seen,
    clear: () => {
      rules.length = 0;
      seen.length = 0;
    },
    stop,
  };
}

/** Serves `server` on a free loopback port; `stop` also cuts open connections (a test never waits for keep-alive). */
export async function listenOnLoopback(server: Server): Promise<{ endpoint: string; stop: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
