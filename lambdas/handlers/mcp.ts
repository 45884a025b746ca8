import { tools } from '../mcp/tools';
import { withReferenceClients } from '../mcp/tools/services';
import { mcpLambdaHandler } from './endpoint';

/** The reference endpoint's MCP function: the demo tools. A team's endpoint bundles its own tools module instead. */
export const handler = mcpLambdaHandler({ tools }, withReferenceClients);
