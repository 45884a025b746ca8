import { configuredDownstreams } from './config';
import { servedTools } from './tools';

/**
 * The reference endpoint's tools module (IdempotentMcpEndpoint `tools`): the demo tools whose downstream the
 * deployment configures (docs/deploy.md), chosen once per container from the functions' settings. `npm start`
 * configures them all (the sandbox) and serves ./tools as it is.
 */
export const tools = servedTools(configuredDownstreams());

export { withReferenceClients as withClients } from './tools/services';
