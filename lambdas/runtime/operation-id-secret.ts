import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { MIN_SECRET_LENGTH, type SecretSource } from '../config';
import { readOrCreateStateFile } from '../auth/state-file';
import { SecretUnavailableError } from '../core/errors';
import { awsClientConfig } from '../store/clients';

/** Secrets Manager answers in milliseconds; a read slower than this fails the call that needs it, retryable. */
const CONNECTION_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 3000;

/**
 * The key, read on first use and kept for the container's life; a failed read is not kept, so the next call tries
 * again. Lazily on purpose: only operation-id tools need it (most cold starts never do), and neither the client nor
 * a connection is made before then.
 */
export function lazySecret(source: SecretSource): () => Promise<string> {
  if ('value' in source) {
    const value = Promise.resolve(source.value);
    return () => value;
  }
  let pending: Promise<string> | undefined;
  return () =>
    (pending ??= readSecret(source).catch((err: unknown) => {
      pending = undefined;
      throw err;
    }));
}

/**
 * One GetSecretValue with the SDK's Secrets Manager client, in every region the function runs in (the Parameters
 * and Secrets extension, its alternative, is a layer whose ARN CDK knows for some regions only). One attempt: a
 * failed read fails only the call that needed it (retryable), and the next call reads again, paced by the caller's
 * backoff rather than held here. `endpoint`: a Secrets Manager stand-in (SECRETS_MANAGER_ENDPOINT). `what` names the
 * secret in the error (the operation-id secret, the gateway's upstream credentials): an `IdempotencyError` with code
 * `TRANSIENT_FAILURE`.
 * @public
 */
export async function readSecretString(source: { secretArn: string; endpoint?: string }, what: string): Promise<string> {
  const client = new SecretsManagerClient({
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({
      connectionTimeout: CONNECTION_TIMEOUT_MS,
      requestTimeout: REQUEST_TIMEOUT_MS,
      throwOnRequestTimeout: true,
    }),
    ...awsClientConfig(source.endpoint),
  });
  const fail = (reason: string, cause?: unknown) =>
    new SecretUnavailableError(`${what} could not be read from Secrets Manager: ${reason}`, { cause });
  let secret: string | undefined;
  try {
    secret = (await client.send(new GetSecretValueCommand({ SecretId: source.secretArn }))).SecretString;
  } catch (err) {
    throw fail(`${(err as Error).name}: ${(err as Error).message}`.slice(0, 300), err);
  } finally {
    // Read once per container: no socket kept open across a Lambda freeze.
    client.destroy();
  }
  if (typeof secret !== 'string') throw fail('the secret has no string value');
  return secret;
}

async function readSecret(source: Extract<SecretSource, { secretArn: string }>): Promise<string> {
  const secret = await readSecretString(source, 'the operation-id secret');
  if (secret.length < MIN_SECRET_LENGTH)
    throw new SecretUnavailableError(
      `the operation-id secret could not be read from Secrets Manager: the secret must be at least ${MIN_SECRET_LENGTH} characters`,
    );
  return secret;
}

/**
 * Where a local run (`npm start`, the gateway command) keeps its operation-id secret, in its state folder.
 */
export const OPERATION_ID_SECRET_FILE = 'operation-id-secret';

/**
 * A local run's operation-id secret: made on the first start and kept in `dir`, so operation ids issued before a
 * restart stay valid after it; two processes starting at once on one folder get the same secret.
 */
export async function localOperationIdSecret(dir: string): Promise<string> {
  return (await readOrCreateStateFile(join(dir, OPERATION_ID_SECRET_FILE), () => randomBytes(32).toString('base64url'))).trim();
}
