import { createHash, createHmac } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import { listenOnLoopback } from './dynamodb-fault-proxy';

/**
 * An HTTP proxy in front of DynamoDB Local that checks AWS Signature Version 4 the way DynamoDB does, written from
 * the specification with node:crypto alone (not with the signer under test): DynamoDB Local accepts any signature,
 * so without this a signing mistake would first show in AWS. A request signed with the wrong secret, for another
 * region or service, with a changed body, or without signing the headers that carry the operation, gets DynamoDB's
 * 400 `InvalidSignatureException` (or `MissingAuthenticationTokenException`); a valid one is forwarded.
 */
export interface SigV4VerifyingProxy {
  endpoint: string;
  /** Every request, in order: whether its signature held, and the headers it signed. */
  checked(): ReadonlyArray<{ valid: boolean; reason?: string; signedHeaders: string[]; accessKeyId?: string }>;
  stop(): Promise<void>;
}

export interface Secret {
  accessKeyId: string;
  secretAccessKey: string;
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();
const sha256Hex = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** The checks, as a function: the signature `request` carries must be the one its secret gives. */
export function verifySigV4(
  request: { method: string; path: string; headers: IncomingMessage['headers']; body: Buffer },
  secrets: readonly Secret[],
  expected: { region: string; service: string },
): { valid: boolean; reason?: string; signedHeaders: string[] } {
  const authorization = String(request.headers.authorization ?? '');
  const match =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(
      authorization,
    );
  if (!match) return { valid: false, reason: 'no SigV4 authorization header', signedHeaders: [] };
  const [, accessKeyId, date, region, service, signedHeaderList, signature] = match as unknown as string[];
  const signedHeaders = signedHeaderList!.split(';');
  const fail = (reason: string) => ({ valid: false, reason, signedHeaders });
  const secret = secrets.find((s) => s.accessKeyId === accessKeyId);
  if (!secret) return fail(`unknown access key ${accessKeyId}`);
  if (region !== expected.region || service !== expected.service) return fail(`scope ${region}/${service}`);
  const amzDate = String(request.headers['x-amz-date'] ?? '');
  if (!amzDate.startsWith(date!)) return fail('x-amz-date does not match the credential scope');
  // The operation travels in X-Amz-Target on JSON protocols (DynamoDB, SQS); REST ones (SES v2) name it in the path.
  const carried = ['x-amz-target', 'x-amz-security-token'].filter((name) => request.headers[name] !== undefined);
  const mustSign = ['host', 'x-amz-date', ...carried];
  const unsigned = mustSign.filter((name) => !signedHeaders.includes(name));
  if (unsigned.length > 0) return fail(`headers not signed: ${unsigned.join(', ')}`);
  if ([...signedHeaders].sort().join(';') !== signedHeaderList) return fail('signed headers not sorted');
  const payloadHash = sha256Hex(request.body);
  const declared = request.headers['x-amz-content-sha256'];
  if (declared !== undefined && declared !== payloadHash) return fail('x-amz-content-sha256 does not match the body');
  const canonicalHeaders = signedHeaders
    .map((name) => {
      const value = request.headers[name];
      const text = Array.isArray(value) ? value.join(',') : String(value ?? '');
      return `${name}:${text.trim().replace(/\s+/g, ' ')}\n`;
    })
    .join('');
  const [path, query = ''] = request.path.split('?');
  const canonicalQuery = query.split('&').filter(Boolean).sort().join('&');
  const canonicalRequest = [request.method, path, canonicalQuery, canonicalHeaders, signedHeaderList, payloadHash].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret.secretAccessKey}`, date!), region!), service!), 'aws4_request');
  const expectedSignature = hmac(key, stringToSign).toString('hex');
  return expectedSignature === signature ? { valid: true, signedHeaders } : fail('signature does not match');
}

export async function startSigV4VerifyingProxy(
  target: string,
  secrets: readonly Secret[],
  expected: { region: string; service: string } = { region: 'us-east-1', service: 'dynamodb' },
): Promise<SigV4VerifyingProxy> {
  const targetUrl = new URL(target);
  const checked: Array<{ valid: boolean; reason?: string; signedHeaders: string[]; accessKeyId?: string }> = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const verdict = verifySigV4({ method: req.method ?? '', path: req.url ?? '/', headers: req.headers, body }, secrets, expected);
    checked.push({ ...verdict, accessKeyId: /Credential=([^/]+)\//.exec(String(req.headers.authorization ?? ''))?.[1] });
    if (!verdict.valid) {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'com.amazon.coral.service#InvalidSignatureException', message: verdict.reason }));
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
        const answer: Buffer[] = [];
        for await (const chunk of upstreamRes) answer.push(chunk as Buffer);
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        res.end(Buffer.concat(answer));
      },
    );
    upstream.on('error', () => req.socket.destroy());
    upstream.end(body);
  });
  return { ...(await listenOnLoopback(server)), checked: () => checked };
}
