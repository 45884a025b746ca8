import { loadConfig, resolveSecretEnv } from '../config';
import { createLambdaHandler } from '../http/lambda';
import { createServices } from '../runtime/services';

// Once per container, outside the handler: clients, the JWKS cache and the app serve every invocation.
// Deployed, the operation-id secret is read from Secrets Manager here, during the init phase.
export const handler = createLambdaHandler(createServices(loadConfig(await resolveSecretEnv())));
