import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACCOUNT } from './template';

/*
 * The HTTP front doors of a local deployment (local-deploy.ts): a request as the Lambda event a Function URL or an
 * HTTP API sends (payload format 2.0), and the function's answer back as the HTTP response they give.
 */

const TEXT_BODY = /^(text\/|application\/(json|x-www-form-urlencoded|xml|javascript)|[^;]*\+json)/;

export async function listen(server: Server): Promise<string> {
  // Longer than the SDK's idle keep-alive sockets live: a reused socket is never closed under a request.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The request as a Function URL or an HTTP API route hands it to the function, at the deployment's clock. */
export async function httpEvent(
  req: IncomingMessage,
  routeKey: string,
  apiId: string,
  clockOffsetMs: number,
  extra: Record<string, unknown> = {},
) {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  const url = new URL(req.url ?? '/', 'http://local');
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(req.headers))
    if (value !== undefined && key !== 'cookie') headers[key] = Array.isArray(value) ? value.join(',') : value;
  const cookies = req.headers.cookie?.split(/;\s*/).filter(Boolean);
  const text = TEXT_BODY.test(String(req.headers['content-type'] ?? ''));
  const query = url.search.slice(1);
  const now = Date.now() + clockOffsetMs;
  return {
    version: '2.0',
    routeKey,
    rawPath: url.pathname,
    rawQueryString: query,
    ...(cookies?.length ? { cookies } : {}),
    headers,
    ...(query ? { queryStringParameters: Object.fromEntries(url.searchParams) } : {}),
    requestContext: {
      accountId: apiId === 'url' ? 'anonymous' : ACCOUNT,
      apiId,
      domainName: String(req.headers.host),
      domainPrefix: String(req.headers.host).split('.')[0],
      http: {
        method: req.method,
        path: url.pathname,
        protocol: 'HTTP/1.1',
        sourceIp: '127.0.0.1',
        userAgent: String(req.headers['user-agent'] ?? ''),
      },
      requestId: randomUUID(),
      routeKey,
      stage: '$default',
      time: new Date(now).toUTCString(),
      timeEpoch: now,
    },
    ...(body.length
      ? { body: text ? body.toString('utf8') : body.toString('base64'), isBase64Encoded: !text }
      : { isBase64Encoded: false }),
    ...extra,
  };
}

/** The function's answer as the front door sends it: a 502 for an error, the payload format's fields otherwise. */
export async function respond(res: ServerResponse, answer: { result?: any; error?: { errorMessage: string } }) {
  if (answer.error || answer.result === null || answer.result === undefined) {
    res
      .writeHead(502, { 'content-type': 'application/json' })
      .end(JSON.stringify({ message: 'Internal Server Error', cause: answer.error?.errorMessage }));
    return;
  }
  const result = answer.result;
  if (typeof result !== 'object' || result.statusCode === undefined) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(typeof result === 'string' ? result : JSON.stringify(result));
    return;
  }
  const headers: Record<string, string | string[]> = { ...(result.headers ?? {}) };
  if (result.cookies?.length) headers['set-cookie'] = result.cookies;
  res
    .writeHead(result.statusCode, headers)
    .end(result.body === undefined ? '' : Buffer.from(result.body, result.isBase64Encoded ? 'base64' : 'utf8'));
}
