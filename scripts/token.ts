/**
 * `npm run token -- --tenant <id> [--ttl <seconds>] [--scope "<scopes>"]`: prints a bearer token of the local dev
 * issuer (the key in .local/auth that `npm start` trusts) for any tenant. By default it carries the scopes the local
 * endpoint requires; `--scope` sets others (space-separated, "" for none), to see a 403 insufficient_scope.
 */
import { parseArgs } from 'node:util';
import { DEV_TOKEN_TTL_SECONDS, devIssuerFor } from '../lambdas/auth/dev-issuer';
import { IdempotencyError } from 'idempotent-mcp/engine';
import { validateTenantId } from '../lambdas/core/idempotency-key';
import { loadAuthConfig } from '../lambdas/config';

const usage = 'usage: npm run token -- --tenant <id> [--ttl <seconds>] [--scope "<space-separated scopes>"]';
let values: { tenant?: string; ttl?: string; scope?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: { tenant: { type: 'string' }, ttl: { type: 'string' }, scope: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  }));
} catch (err) {
  console.error(`${(err as Error).message}\n${usage}`);
  process.exit(2);
}
if (values.help || !values.tenant) {
  console.error(usage);
  process.exit(values.help ? 0 : 2);
}
try {
  validateTenantId(values.tenant);
} catch (err) {
  if (!(err instanceof IdempotencyError)) throw err;
  console.error(`${err.message}\n${usage}`);
  process.exit(2);
}
const ttlSeconds = values.ttl === undefined ? DEV_TOKEN_TTL_SECONDS : Number(values.ttl);
if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) {
  console.error(`--ttl must be a positive whole number of seconds\n${usage}`);
  process.exit(2);
}

const auth = loadAuthConfig({ ...process.env, AUTH_MODE: 'dev' });
if (auth.mode !== 'dev') throw new Error('unreachable: dev auth requested');
const issuer = await devIssuerFor(auth);
const scope = values.scope?.split(' ').filter(Boolean).join(' ');
console.log(await issuer.sign({ tenant: values.tenant, ttlSeconds, scope }));
