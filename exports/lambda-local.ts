/**
 * `idempotent-mcp/lambda/local`: running the Lambda wiring on one machine (`npm start`, `idempotent-mcp dev`): the
 * development token issuer and its sign-in page, an AWS SDK client's settings for a local emulator, and the files a
 * local endpoint keeps its keys in. Never in a deployed function.
 */
export { awsClientConfig } from '../lambdas/store/clients';
export { devIssuerFor, type DevIssuer } from '../lambdas/auth/dev-issuer';
export { createDevSignIn } from '../lambdas/http/dev-sign-in';
export { DEV_KEY_FILE } from '../lambdas/auth/dev-keys';
export { DEV_SIGN_IN_MOUNT } from '../lambdas/config';
export { localOperationIdSecret, OPERATION_ID_SECRET_FILE } from '../lambdas/runtime/operation-id-secret';
