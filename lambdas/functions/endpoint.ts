import * as z from 'zod';
import { loadConfig } from '../config';
import { createLambdaHandler } from '../http/function-url';
import type { ToolRuntime } from '../mcp/tool-types';
import type { ToolsModule } from '../mcp/tools-module';
import { createServices, type Services } from '../runtime/services';
import { clientsOf, oneArgument, toolsOf } from './tools-exports';

/**
 * The MCP function of an endpoint serving these tools. Once per container, outside the handler: clients, the JWKS
 * cache (its fetch started here) and the app serve every invocation; the operation-id key is read by the first call
 * that needs one. The module's `withClients`, if it exports one, adds the clients the tools call to the services (the
 * reference endpoint's payments provider); the toolkit builds none of its own. `module` is the tools module
 * (`import * as toolsModule`, or `{ tools, withClients }`), its one argument; a module without `tools` (or a default
 * export of the tool list), with a `withClients` that is not a function, or a second argument (`withClients` apart
 * from the module), fails the cold start with the reason.
 * @public
 */
export function mcpLambdaHandler<S extends ToolRuntime>(module: ToolsModule<S>) {
  // biome-ignore lint/complexity/noArguments: the count of what a caller passed, an untyped bundle's included.
  oneArgument('mcpLambdaHandler', arguments.length);
  const withClients = clientsOf<Services>(module, (services) => services);
  // Zod compiles a fast path (new Function) for each schema on its first parse: on Lambda the cold request pays for
  // it and small requests barely win it back. Interpreted parsing is the cheaper trade here (see test/bench/cold-start.ts).
  z.config({ jitless: true });
  const services = withClients(createServices(loadConfig()));
  // The issuer's key set is read while the rest of the cold start goes on, not by the first request.
  services.auth.prefetch?.();
  return createLambdaHandler(services, { tools: toolsOf(module) });
}
