import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import { createServices } from '../runtime/services';
import { createReconcilerHandler } from '../runtime/worker-handlers';
import { createWorkers } from '../runtime/workers';
import { type ToolsModule, toolsOf } from './tools-module';

/**
 * The reconciler of an endpoint serving these tools: their reconcile hooks settle lost outcomes. A module of its
 * own, apart from the MCP function's factory (./endpoint.ts): importing that one would bundle the MCP SDK here, whose
 * modules run code at load and so survive tree-shaking even when nothing calls them.
 */
export function reconcilerLambdaHandler(module: ToolsModule) {
  const services = createServices(loadWorkerConfig());
  return withMetrics(createReconcilerHandler(createWorkers(services, { tools: toolsOf(module) }), services.logger));
}
