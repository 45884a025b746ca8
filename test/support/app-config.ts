import type { AppConfig } from '../../lambdas/config';

/**
 * The settings `createApp` reads, for a test that serves tools over the endpoint's HTTP app without a Lambda: dev
 * sign-in (the test's own verifier decides the tenant), no origins, no public URL, nothing opted out of confirmation.
 */
export const testAppConfig = {
  allowedOrigins: [],
  publicBaseUrl: undefined,
  auth: {
    mode: 'dev',
    issuer: 'https://issuer.example',
    requiredScopes: [],
    devAuthDir: '',
    audience: '',
    tenantClaim: 'tenant',
  } satisfies AppConfig['auth'],
  confirmationOptOut: [],
};
