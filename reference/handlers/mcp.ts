import { mcpLambdaHandler } from 'idempotent-mcp/lambda';
import { tools } from '../tools';
import { withReferenceClients } from '../tools/services';

/** The reference endpoint's MCP function: the demo tools. A team's endpoint bundles its own tools module instead. */
export const handler = mcpLambdaHandler({ tools, withClients: withReferenceClients });
