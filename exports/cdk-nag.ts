/** `idempotent-mcp/cdk/nag`: cdk-nag rules for an endpoint (needs the optional peer `cdk-nag`, which `idempotent-mcp/cdk` does not). */
export { IdempotentMcpChecks } from '../lib/nag-checks';
