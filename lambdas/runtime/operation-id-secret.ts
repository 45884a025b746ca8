import { request } from 'node:http';
import { MIN_SECRET_LENGTH, type SecretSource } from '../config';
import { SecretUnavailableError } from '../core/errors';


const EXTENSION_TIMEOUT_MS = 3000;
const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * The key, read on first use and kept for the container's life; a failed read is not kept, so the next call tries
 * again. Lazily on purpose: only operation-id tools need it (most cold starts never do), and the extension answers
 * only during an invocation, not in the init phase.
 */
export function lazySecret(source: SecretSource): () => Promise<string> {
  if ('value' in source) {
    const value = Promise.resolve(source.value);
    return () => value;
  }
  let pending: Promise<string> | undefined;
  return () =>
    (pending ??= readThroughExtension(source).catch((err: unknown) => {
      pending = undefined;
      throw err;
    }));
}

/**
 * One GET on localhost, answered from the extension's cache after its first Secrets Manager call. Not the SDK's
 * Secrets Manager client: that is 29 KiB of the MCP function's bundle and an HTTPS call during every cold start.
 */
function readThroughExtension(source: Extract<SecretSource, { secretArn: string }>): Promise<string> {
  const path = `/secretsmanager/get?secretId=${encodeURIComponent(source.secretArn)}`;
  return new Promise<string>((resolve, reject) => {
    const fail = (reason: string, cause?: unknown) =>
      reject(new SecretUnavailableError(`the operation-id secret could not be read through the Parameters and Secrets extension: ${reason}`, { cause }));
    const req = request(
      {
        host: 'localhost',
        port: source.extensionPort,
        path,
        headers: { 'X-Aws-Parameters-Secrets-Token': source.sessionToken },
        timeout: EXTENSION_TIMEOUT_MS,
        // No pooled socket to outlive a Lambda freeze: the secret is read once per container.
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) req.destroy(new Error('response too large'));
          else chunks.push(chunk);
        });
        res.on('error', (err) => fail('the response broke off', err));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          // The extension's own errors are short texts (not ready, forbidden, Secrets Manager's answer): worth a log.
          if (res.statusCode !== 200) return fail(`HTTP ${res.statusCode}: ${body.slice(0, 200)}`);
          let secret: unknown;
          try {
            secret = (JSON.parse(body) as { SecretString?: unknown }).SecretString;
          } catch (err) {
            return fail('the answer is not JSON', err);
          }
          if (typeof secret !== 'string') return fail('the secret has no string value');
          if (secret.length < MIN_SECRET_LENGTH) return fail(`the secret must be at least ${MIN_SECRET_LENGTH} characters`);
          resolve(secret);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${EXTENSION_TIMEOUT_MS} ms`)));
    req.on('error', (err) => fail(err.message, err));
    req.end();
  });
}
