import * as z from 'zod';
import { loadConfig, loadWorkerConfig } from '../config';
import { createLambdaHandler } from '../http/lambda';
import type { ToolDefinition } from '../mcp/tool-types';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import { createReconcilerHandler } from '../runtime/worker-handlers';
import { createWorkers } from '../runtime/workers';

/** A team's tools module: `export const tools = [...]` (or a default export of the list). */
export interface ToolsModule {
  tools?: unknown;
  default?: unknown;
}

/** The tool list of a tools module, or an error naming what is missing (it fails the cold start, not a request). */
export function toolsOf(module: ToolsModule): readonly ToolDefinition[] {
  const tools = module.tools ?? module.default;
  const valid = Array.isArray(tools) && tools.every((t) => typeof t?.name === 'string' && typeof t?.call === 'function');
  if (!valid) throw new TypeError('the tools module must export `tools`: an array of defineWriteTool / defineReadTool results');
  return tools as readonly ToolDefinition[];
}

/**
 * The MCP function of an endpoint serving these tools. Once per container, outside the handler: clients, the JWKS
 * cache (its fetch started here) and the app serve every invocation; the operation-id key is read by the first call
 * that needs one.
 */
export function mcpLambdaHandler(module: ToolsModule) {
  // Zod compiles a fast path (new Function) for each schema on its first parse: on Lambda the cold request pays for
  // it and small requests barely win it back. Interpreted parsing is the cheaper trade here (see bench/cold-start.ts).
  z.config({ jitless: true });
  const services = createServices(loadConfig());
  // The issuer's key set is read while the rest of the cold start goes on, not by the first request.
  services.auth.prefetch();
  return createLambdaHandler(services, { tools: toolsOf(module) });
}

/** The reconciler of an endpoint serving these tools: their reconcile hooks settle lost outcomes. */
export function reconcilerLambdaHandler(module: ToolsModule) {
  const services = createServices(loadWorkerConfig());
  return withMetrics(createReconcilerHandler(createWorkers(services, { tools: toolsOf(module) }), services.logger));
}
