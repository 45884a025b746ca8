import { createHash } from 'node:crypto';
import { flag, httpUrl, text, type EnvVar } from '../env-var';
import type { UpstreamTarget } from './upstream';

/**
 * The gateway's own settings, each declared once (the bin reads them; the construct that deploys a gateway writes
 * them with `environmentFor(GatewayEnvVars, ...)`). The endpoint's settings (table, auth, reconciler) are `EnvVars`.
 */
export const GatewayEnvVars = {
  /** The policy file (JSON). */
  policyFile: text('GATEWAY_POLICY_FILE'),
  /** A streamable-HTTP upstream. */
  upstreamUrl: httpUrl('GATEWAY_UPSTREAM_URL'),
  /** The gateway's upstream credentials: a JSON file (locally). */
  credentialsFile: text('GATEWAY_CREDENTIALS_FILE'),
  /** The same JSON, in the variable itself (locally, a CI secret). */
  credentialsJson: text('GATEWAY_CREDENTIALS'),
  /** Deployed: a Secrets Manager secret holding that JSON. */
  credentialsSecretArn: text('GATEWAY_CREDENTIALS_SECRET_ARN'),
  /**
   * Deployed: `true` where the function keeps the upstream's `tools/list` it read in the table (the MCP function,
   * which may write items); unset, it only reads a kept one (the reconciler, read-only there).
   */
  keepListing: flag('GATEWAY_KEEP_LISTING'),
} as const satisfies Record<string, EnvVar<unknown>>;

/**
 * Whose records a gateway's are on a shared table (`TABLE_KEY_PREFIX`'s default for a gateway): its upstream's,
 * `gw.<16 hex>:`, a digest of the upstream's URL (as `new URL` writes it) or of its command and arguments (not its
 * environment or credentials). The same upstream gives the same prefix after every restart and deploy, so a retry
 * after a restart finds its record; two upstreams give two, so their records, lookups and reconcilers never mix,
 * even with the same tool names. Another URL or command for the same server is another owner: set
 * TABLE_KEY_PREFIX to keep the old one (docs/gateway.md, "Sharing a table").
 */
export function upstreamKeyPrefix(upstream: UpstreamTarget): string {
  const identity = 'url' in upstream ? ['url', new URL(upstream.url).href] : ['stdio', upstream.command, ...(upstream.args ?? [])];
  return `gw.${createHash('sha256').update(JSON.stringify(identity)).digest('hex').slice(0, 16)}:`;
}
