import { readFile } from 'node:fs/promises';
import * as z from 'zod';

/**
 * The gateway's own credentials for the upstream, per tenant. The upstream never sees the agent's token: MCP forbids
 * passing a token through (the upstream, or whoever reads its logs, could replay it against the gateway and every
 * other service that trusts the same issuer, and the upstream could not tell the gateway's calls from the agent's
 * own). The gateway authenticates itself with a credential the upstream issued to it, chosen by the verified tenant.
 */

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

const credentialSchema = z.union([
  /** A header on every request to an HTTP upstream (`Authorization: Bearer ...`, `X-Api-Key: ...`). */
  z.strictObject({
    header: z.strictObject({ name: z.string().regex(HEADER_NAME, 'must be an HTTP header name'), value: z.string().min(1) }),
  }),
  /** OAuth client credentials (client_secret_basic) at the authorization server the HTTP upstream names. */
  z.strictObject({
    oauthClientCredentials: z.strictObject({
      clientId: z.string().min(1),
      clientSecret: z.string().min(1),
      scope: z.string().optional(),
      /** The authorization server's issuer the credentials were registered with: they are sent to no other. */
      issuer: z.string().url(),
    }),
  }),
  /** Environment variables of a stdio upstream's process (one process per credential). */
  z.strictObject({ env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'), z.string()) }),
  /** No credential: an upstream that asks for none (a local stdio server). Said explicitly, never assumed. */
  z.strictObject({ none: z.literal(true) }),
]);

export type UpstreamCredential = z.output<typeof credentialSchema>;

/** The credentials file (or Secrets Manager secret): by tenant, `*` for every tenant not named. */
const credentialsFileSchema = z.strictObject({ tenants: z.record(z.string().min(1), credentialSchema) });
export type CredentialsFile = z.output<typeof credentialsFileSchema>;

/**
 * Where the gateway's credentials come from: a port, so a deployment reads them from Secrets Manager and a local run
 * from a file or the environment. `forTenant` answers undefined when the tenant has none: the call is refused and
 * nothing is sent.
 */
export interface CredentialSource {
  forTenant(tenant: string): Promise<UpstreamCredential | undefined>;
  /** The credential `tools/list` is read with at start: `*`'s, else none. */
  forListing(): Promise<UpstreamCredential | undefined>;
}

export class CredentialsError extends Error {
  override name = 'CredentialsError';
}

/** The file's content checked, one sentence per mistake naming the tenant and field (values never repeated). */
export function parseCredentials(input: unknown, origin: string): CredentialsFile {
  const parsed = credentialsFileSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => {
    const [top, tenant, ...field] = issue.path.map(String);
    if (top !== 'tenants' || tenant === undefined) return `${origin}: it must be { "tenants": { "<tenant or *>": { "header": {...} } } }`;
    return `${origin}: tenant ${tenant}${field.length ? `, field ${field.join('.')}` : ''}: ${
      issue.code === 'invalid_union' ? 'give one of header, oauthClientCredentials, env or none' : issue.message
    }`;
  });
  throw new CredentialsError([...new Set(lines)].join('\n'));
}

/** A source over a credentials object already read (a file, the environment, a secret). */
export function staticCredentials(file: CredentialsFile): CredentialSource {
  return {
    forTenant: async (tenant) => file.tenants[tenant] ?? file.tenants['*'],
    forListing: async () => file.tenants['*'] ?? Object.values(file.tenants)[0],
  };
}

/** Locally: a JSON file (keep it out of version control; mode 600). */
export async function fileCredentials(path: string): Promise<CredentialSource> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CredentialsError(
      `the credentials file ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new CredentialsError(`the credentials file ${path} is not JSON`);
  }
  return staticCredentials(parseCredentials(json, path));
}

/** Locally: the same JSON in an environment variable (a CI secret, for instance). */
export function envCredentials(name: string, value: string): CredentialSource {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    throw new CredentialsError(`${name} is not JSON`);
  }
  return staticCredentials(parseCredentials(json, name));
}

/** A stable id of a credential: upstream connections are kept per credential, never shared across two. */
export function credentialId(credential: UpstreamCredential): string {
  return JSON.stringify(credential);
}
