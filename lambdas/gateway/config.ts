import { flag, httpUrl, text, type EnvVar } from '../config';

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
