import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SecretsManagerStandIn {
  /** SECRETS_MANAGER_ENDPOINT for the functions. */
  endpoint: string;
  /** Every request it answered: the secret asked for, and whether the caller signed it (SigV4). */
  requests: Array<{ secretId: string | null; signed: boolean }>;
  /** This many of the next requests get 500 InternalServiceError (Secrets Manager failing for a moment); Infinity: all. */
  failNext: number;
  stop(): Promise<void>;
}

const error = (type: string, message: string) => JSON.stringify({ __type: type, message });

/**
 * Stands in for Secrets Manager's GetSecretValue as its API reference describes it (no emulator of it runs here):
 * the AWS JSON 1.1 protocol, `POST /` with `X-Amz-Target: secretsmanager.GetSecretValue` and `{"SecretId": ...}`,
 * answering the secret's `SecretString`, or ResourceNotFoundException for a secret it does not have.
 */
export async function startSecretsManager(secrets: Record<string, string>): Promise<SecretsManagerStandIn> {
  const standIn: SecretsManagerStandIn = { endpoint: '', requests: [], failNext: 0, stop: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let secretId: string | null = null;
      try {
        secretId = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { SecretId?: string }).SecretId ?? null;
      } catch {
        // Left null: answered below as a bad request.
      }
      standIn.requests.push({ secretId, signed: /^AWS4-HMAC-SHA256 /.test(req.headers.authorization ?? '') });
      const answer = (status: number, body: string) => res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' }).end(body);
      if (standIn.failNext > 0) {
        standIn.failNext--;
        return answer(500, error('InternalServiceError', 'Secrets Manager is unavailable'));
      }
      if (req.method !== 'POST' || req.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue' || secretId === null)
        return answer(400, error('InvalidRequestException', 'not a GetSecretValue request'));
      const value = secrets[secretId];
      if (value === undefined) return answer(400, error('ResourceNotFoundException', "Secrets Manager can't find the specified secret."));
      answer(
        200,
        JSON.stringify({
          ARN: secretId,
          Name: 'operation-ids',
          SecretString: value,
          VersionId: 'v1',
          VersionStages: ['AWSCURRENT'],
          CreatedDate: 1.7e9,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  standIn.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return standIn;
}
