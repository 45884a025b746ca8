import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JWK } from 'jose';

/**
 * Where the local issuer keeps its key pair, and how the verifier reads the public half. Apart from dev-issuer.ts
 * (which generates keys and signs tokens) so the verifier, and with it every Lambda bundle, carries neither.
 */
export const DEV_KEY_FILE = 'dev-issuer.json';

export interface StoredKeyPair {
  kid: string;
  privateJwk: JWK;
  publicJwk: JWK;
}

export async function readDevKeyPair(dir: string): Promise<StoredKeyPair> {
  return JSON.parse(await readFile(join(dir, DEV_KEY_FILE), 'utf8')) as StoredKeyPair;
}

/** The public key set of the local issuer; fails (ENOENT) until the issuer has made its key, i.e. before any token exists. */
export async function readDevJwks(dir: string): Promise<{ keys: JWK[] }> {
  return { keys: [(await readDevKeyPair(dir)).publicJwk] };
}
