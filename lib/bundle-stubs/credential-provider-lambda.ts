// Stands in for `@aws-sdk/credential-provider-node` (the default credential chain) in the Lambda bundles; see
// LambdaBundle.alias in lib/bundling.ts. Lambda puts the execution role's credentials in the environment, which is
// the first link of the default chain and the only one a function reaches; the other links (SSO, ini files, process,
// web identity, container and instance metadata, with the STS and SSO clients they carry) are ~90 KiB no cold start
// runs. A missing variable still fails with the SDK's own CredentialsProviderError.
export { fromEnv as defaultProvider } from '@aws-sdk/credential-provider-env';
