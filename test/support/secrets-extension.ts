import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SecretsExtensionStandIn {
  port: number;
  /** Every GET it answered: the secret asked for, and whether the caller presented the session token. */
  requests: Array<{ secretId: string | null; tokenOk: boolean }>;
  /** This many of the next requests get 503 (the extension's answer when Secrets Manager fails, say); Infinity: all. */
  failNext: number;
  stop(): Promise<void>;
}

/**
 * Stands in for the AWS Parameters and Secrets Lambda Extension on localhost, answering as its documentation says:
 * `GET /secretsmanager/get?secretId=...` with the `X-Aws-Parameters-Secrets-Token` header set to the function's
 * AWS_SESSION_TOKEN, 200 with Secrets Manager's GetSecretValue answer as JSON, 401 without the token.
 */
export async function startSecretsExtension(secrets: Record<string, string>, sessionToken: string): Promise<SecretsExtensionStandIn> {
  const standIn: SecretsExtensionStandIn = { port: 0, requests: [], failNext: 0, stop: async () => {} };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const secretId = url.searchParams.get('secretId');
    const tokenOk = req.headers['x-aws-parameters-secrets-token'] === sessionToken;
    standIn.requests.push({ secretId, tokenOk });
    if (standIn.failNext > 0) {
      standIn.failNext--;
      return res.writeHead(503).end('secrets manager unavailable');
    }
    if (req.method !== 'GET' || url.pathname !== '/secretsmanager/get') return res.writeHead(404).end('not found');
    if (!tokenOk) return res.writeHead(401).end('unauthorized');
    const value = secretId === null ? undefined : secrets[secretId];
    if (value === undefined) return res.writeHead(400).end('ResourceNotFoundException');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ARN: secretId, Name: 'operation-ids', SecretString: value, VersionId: 'v1', VersionStages: ['AWSCURRENT'] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.port = (server.address() as AddressInfo).port;
  standIn.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return standIn;
}
