import * as z from 'zod';
import { loadConfig, loadWorkerConfig } from '../config';
import { createLambdaHandler } from '../http/lambda';
import type { ToolDefinition } from '../mcp/tool-types';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import type { DeliveryHandler } from '../outbox/consumer';
import { createConsumerSqsHandler, createReconcilerHandler } from '../runtime/worker-handlers';
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
 * cache and the app serve every invocation; the operation-id key is read by the first call that needs one.
 */
export function mcpLambdaHandler(module: ToolsModule) {
  // Zod compiles a fast path (new Function) for each schema on its first parse: on Lambda the cold request pays for
  // it and small requests barely win it back. Interpreted parsing is the cheaper trade here (see bench/cold-start.ts).
  z.config({ jitless: true });
  return createLambdaHandler(createServices(loadConfig()), { tools: toolsOf(module) });
}

/** A team's deliveries module: `export const deliveries = { 'invoice.send': { deliver, verify } }` (or a default export). */
export interface DeliveriesModule {
  deliveries?: unknown;
  default?: unknown;
}

/** The delivery handlers of a deliveries module by event type, or an error naming what is wrong (at cold start). */
export function deliveriesOf(module: DeliveriesModule): Readonly<Record<string, DeliveryHandler>> {
  const deliveries = module.deliveries ?? module.default;
  const problem = (() => {
    if (deliveries === null || typeof deliveries !== 'object' || Array.isArray(deliveries)) return 'an object of delivery handlers by event type';
    for (const [type, handler] of Object.entries(deliveries)) {
      if (typeof (handler as DeliveryHandler | undefined)?.deliver !== 'function') return `a handler with deliver() for every event type (${JSON.stringify(type)} has none)`;
      const verify = (handler as DeliveryHandler).verify;
      if (verify !== undefined && typeof verify !== 'function') return `verify() a function where given (${JSON.stringify(type)})`;
    }
    return undefined;
  })();
  if (problem) throw new TypeError(`the deliveries module must export \`deliveries\`: ${problem}`);
  return deliveries as Readonly<Record<string, DeliveryHandler>>;
}

/** The outbox consumer of an endpoint whose tools queue these event types: the module's handlers deliver them. */
export function consumerLambdaHandler(module: DeliveriesModule) {
  const services = createServices(loadWorkerConfig());
  const workers = createWorkers(services, { deliveries: deliveriesOf(module) });
  return withMetrics(createConsumerSqsHandler(workers, services.logger));
}

/** The reconciler of an endpoint serving these tools: their reconcile hooks settle lost outcomes. */
export function reconcilerLambdaHandler(module: ToolsModule) {
  const services = createServices(loadWorkerConfig());
  return withMetrics(createReconcilerHandler(createWorkers(services, { tools: toolsOf(module) }), services.logger));
}
