import { fromEnv } from '@aws-sdk/credential-provider-env';
import { fromHttp } from '@aws-sdk/credential-provider-http';
import { chain, memoize } from '@smithy/core/config';

/** As the default chain does: credentials with an expiry are fetched again in their last five minutes. */
const REFRESH_BEFORE_EXPIRY_MS = 5 * 60_000;

/**
 * Stands in for `@aws-sdk/credential-provider-node` (the SDK's default credential chain) in the Lambda bundles; see
 * LambdaBundle.alias in lib/bundling.ts. Lambda gives a function its execution role's credentials in environment
 * variables, the chain's first link; the container credentials endpoint (the chain's link for containers) follows
 * in case an execution environment serves them that way instead. The links no function reaches (SSO, ini files,
 * credential processes, web identity, EC2 instance metadata, with the STS and SSO clients they carry) are ~90 KB
 * of every cold start. Without any credentials, the SDK's own CredentialsProviderError surfaces on the first call.
 */
export const defaultProvider = (init: Parameters<typeof fromEnv>[0] & Parameters<typeof fromHttp>[0] = {}) =>
  // Memoized like the chain it replaces: the SDK caches `credentials` a client is given, not what its
  // credentialDefaultProvider returns, so unmemoized every request would resolve (and fetch) them again.
  memoize(
    // fromHttp throws as it is built when no endpoint is configured: built on use, so that is a failed link, not a
    // client that cannot be constructed.
    chain(fromEnv(init), () => fromHttp(init)()),
    (credentials) => credentials.expiration !== undefined && credentials.expiration.getTime() - Date.now() < REFRESH_BEFORE_EXPIRY_MS,
    (credentials) => credentials.expiration !== undefined,
  );
