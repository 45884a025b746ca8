import * as z from 'zod';
import { loadConfig } from '../config';
import { createLambdaHandler } from '../http/function-url';
import { createServices, type Services } from '../runtime/services';
import { clientsOf, type ToolsModuleExports, toolsOf } from './tools-exports';

/**
 * The MCP function of an endpoint serving these tools. Once per container, outside the handler: clients, the JWKS
 * cache (its fetch started here) and the app serve every invocation; the operation-id key is read by the first call
 * that needs one. `withClients` adds the clients the tools call to the services (the reference endpoint's payments
 * provider); by default the tools module's own `withClients`, if it exports one. The toolkit builds none of its own.
 * @public
 */
export function mcpLambdaHandler(
  module: ToolsModuleExports,
  withClients: (services: Services) => Services = clientsOf(module, (services) => services),
) {
  // Zod compiles a fast path (new Function) for each schema on its first parse: on Lambda the cold request pays for
  // it and small requests barely win it back. Interpreted parsing is the cheaper trade here (see test/bench/cold-start.ts).
  z.config({ jitless: true });
  const services = withClients(createServices(loadConfig()));
  // The issuer's key set is read while the rest of the cold start goes on, not by the first request.
  services.auth.prefetch?.();
  return createLambdaHandler(services, { tools: toolsOf(module) });
}
